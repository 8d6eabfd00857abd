// Every setting PocketBase's hooks use, read from the environment in this one
// place, under the sidecar's own names: TRANSCRIBER_ + section + "__" + key,
// as pydantic-settings reads them (sidecar/settings.py). `transcriber serve`
// and `transcriber pocketbase` start PocketBase with these variables set from
// the sidecar's settings (sidecar/pocketbase/process.py `environment`), so one
// value configures both halves; PocketBase started by hand reads the same
// names, durations spelled the same way ("90", "30s", "15m", "8h", "2d").
//
// DECLARED is kept in JSON syntax: tests/unit/test_js_mirrors.py reads it and
// checks each key, its kind and its default against the pydantic model.
// Durations' defaults are in seconds, as the sidecar reads a bare number.
const DECLARED = {
  "intake": {
    "max_upload_mb": ["int", 1024],
    "max_duration": ["duration", 21600],
    "read_timeout": ["duration", 10800]
  },
  "pocketbase": {
    "public_dir": ["text", ""],
    "read_timeout": ["duration", 300]
  },
  "quotas": {
    "uploads_per_hour": ["int", 60],
    "waiting": ["int", 20],
    "audio_hours_per_day": ["number", 24]
  },
  "backups": {
    "cron": ["text", ""],
    "keep": ["int", 3],
    "s3_bucket": ["text", ""],
    "s3_endpoint": ["text", ""],
    "s3_region": ["text", ""],
    "s3_access_key": ["text", ""],
    "s3_force_path_style": ["bool", false]
  }
};

// Names an earlier sidecar gave PocketBase (before both halves used one
// name): still read when the new name is absent, times the factor into the
// declared unit (a duration's is seconds). Nothing sets them any more.
const OLD_NAMES = {
  "TRANSCRIBER_INTAKE__READ_TIMEOUT_MS": ["intake", "read_timeout", 0.001],
  "TRANSCRIBER_INTAKE__MAX_DURATION_MS": ["intake", "max_duration", 0.001],
  "TRANSCRIBER_QUOTAS__AUDIO_SECONDS_PER_DAY": ["quotas", "audio_hours_per_day", 1 / 3600]
};

// Variables of the process that are not settings: the sidecar passes them to
// the PocketBase it starts or to one command it runs.
const PROCESS = {
  version: "TRANSCRIBER_VERSION",  // the sidecar's version (GET /api/transcriber/version)
  accountPassword: "TRANSCRIBER_ACCOUNT_PASSWORD",  // H5: an account command's password, never on its command line
  eraseProviderCopies: "TRANSCRIBER_ERASE_PROVIDER_COPIES",  // sender-erase: provider copies removed first
  seedFingerprints: "TRANSCRIBER_SEED_FINGERPRINTS",  // backups-seed, owner-upsert: the keys the settings name (lib/seeds.js)
  settingsKey: "PB_ENCRYPTION_KEY",  // PocketBase's settings key (--encryptionEnv; sidecar/pocketbase/settings_key.py)
};

const UNITS = { ms: 0.001, s: 1, m: 60, min: 60, h: 3600, d: 86400 };

function envName(section, key) {
  return "TRANSCRIBER_" + section.toUpperCase() + "__" + key.toUpperCase();
}

// Seconds from "90", "1.5", "30s", "15m", "8h", "2d" (sidecar/settings.py `_duration`), else NaN.
function seconds(raw) {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h|d)?\s*$/.exec(raw);
  return m ? parseFloat(m[1]) * UNITS[m[2] || "s"] : NaN;
}

function parse(kind, raw) {
  if (kind === "text") return raw;
  if (kind === "bool") return ["1", "true", "yes", "on"].indexOf(raw.trim().toLowerCase()) >= 0;
  const n = kind === "duration" ? seconds(raw) : Number(raw);
  if (raw.trim() === "" || !isFinite(n) || n < 0) return undefined;
  return kind === "int" ? Math.floor(n) : n;
}

function oldValue(section, key) {
  for (const name in OLD_NAMES) {
    const [s, k, factor] = OLD_NAMES[name];
    if (s !== section || k !== key) continue;
    const n = Number($os.getenv(name));
    if ($os.getenv(name) !== "" && isFinite(n) && n >= 0) return n * factor;
  }
  return undefined;
}

// The value of [section] key: a number for int and number, seconds for a
// duration, a string or a boolean; the declared default when unset or unreadable.
function get(section, key) {
  const declared = (DECLARED[section] || {})[key];
  if (!declared) throw new Error("no setting [" + section + "] " + key + " in lib/settings.js");
  const [kind, fallback] = declared;
  let value = parse(kind, $os.getenv(envName(section, key)));
  if (value === undefined && kind !== "text") value = oldValue(section, key);
  if (value === undefined || (kind === "text" && value === "")) return fallback;
  return value;
}

// A duration setting in milliseconds (the unit of every time the hooks compare).
function ms(section, key) {
  return Math.round(get(section, key) * 1000);
}

// A variable of the process (PROCESS), "" when unset.
function processValue(name) {
  if (!PROCESS[name]) throw new Error("no process variable '" + name + "' in lib/settings.js");
  return $os.getenv(PROCESS[name]);
}

module.exports = { get: get, ms: ms, processValue: processValue };
