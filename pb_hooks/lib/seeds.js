// The settings file seeds PocketBase's own settings; it does not own them.
// The owner changes the same settings in the panel (Settings → Backups, their
// own password), and a start must not put the file's value back over theirs.
//
// For each key the file names (the sidecar passes only those, each with a
// fingerprint of the file's value) a start:
// - does nothing when PocketBase already has the file's value;
// - applies the file's value when it changed since it was last applied, or
//   when it was never applied and PocketBase still has its default;
// - otherwise keeps what PocketBase has (the owner's), and says so.
// What the file last applied is remembered in data.db (`_transcriber_seeds`,
// migration 1766275200), so a restored backup remembers it too. A key the
// file does not name is never touched.
//
// Fingerprints are the sidecar's (sidecar/pocketbase/seeds.py): the value
// itself where nothing in it is secret, an scrypt hash where it is (a
// password, the S3 secret); never the secret.

const settings = require("./settings.js");

const TABLE = "_transcriber_seeds";

// The fingerprints of the keys the settings name ({key: fingerprint}), from
// the sidecar; null when none were passed (the command was run by hand).
function given() {
  const raw = settings.processValue("seedFingerprints");
  return raw ? JSON.parse(raw) : null;
}

function recall(app, key) {
  const rows = arrayOf(new DynamicModel({ applied: "" }));
  app.db().newQuery("SELECT applied FROM " + TABLE + " WHERE key = {:key}").bind({ key: key }).all(rows);
  return rows.length ? rows[0].applied : null;
}

function remember(app, key, fingerprint) {
  app.db().newQuery(
    "INSERT INTO " + TABLE + " (key, applied, updated) VALUES ({:key}, {:applied}, {:now}) " +
    "ON CONFLICT(key) DO UPDATE SET applied = excluded.applied, updated = excluded.updated",
  ).bind({ key: key, applied: fingerprint, now: new DateTime().string() }).execute();
}

// The rule, once: "same" (PocketBase has the file's value), "apply" or "keep".
function decide(last, fingerprint, inSync, isDefault) {
  if (inSync) return "same";
  if (last === null) return isDefault ? "apply" : "keep";
  return last === fingerprint ? "keep" : "apply";
}

// What a start does with one named key: `key.inSync()`, `key.isDefault()` and
// `key.apply()` are the key's own. Returns {outcome, first}; the file's
// fingerprint is remembered unless the outcome is "apply" (`applied` does that
// once the write is saved). A key kept and never applied takes the file's
// present value as the one last applied: an edit of the file from here on is
// the file's change, and applies.
function settle(app, name, fingerprint, key) {
  const last = recall(app, name);
  const outcome = decide(last, fingerprint, key.inSync(), key.isDefault());
  if (outcome === "apply") key.apply();
  else remember(app, name, fingerprint);
  return { outcome: outcome, first: last === null };
}

module.exports = { given: given, settle: settle, recall: recall, remember: remember };
