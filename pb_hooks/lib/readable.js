// What a claimer must be able to read (the sidecar's AudioRecord, FileRow and
// AttemptRow): each field the claim hands out, and the kind of value it holds.
//
// The claim checks a row twice inside its transaction (lib/claim.js): the
// stored values in SQL, before its UPDATE writes (which would turn a text
// `attempts` into 1, and leave a text `claim_expires_at` claimable never);
// then the JSON it hands out, the recording's files and attempts with it (a
// `speech` that is no JSON, a number past any time). A row that fails either
// is set aside (halted `unclaimable`, what is wrong in its journal) and the
// claim takes the next: SQLite lets a hand edit, an older release or a bug
// store any value of any type in any column not declared NOT NULL, and any
// type at all in one that is.

const followups = require("./followups.js");

// A whole number past 2^53 is no longer one in JavaScript (nor a time, count or length).
const MAX_COUNT = 9007199254740991;

// The kinds: text; a count (a whole number from 0 to 2^53: a time in ms, a counter, a
// length); a fraction (from 0 to 1); a flag; speech (null, or [start, end] pairs of counts).
const WANTED = {
  text: "text",
  count: "a whole number from 0 to " + MAX_COUNT,
  fraction: "a number from 0 to 1",
  flag: "true or false",
  speech: "null or a list of [start, end] pairs of whole numbers",
};

function kinds(kind, names) {
  const out = {};
  for (const n of names) out[n] = kind;
  return out;
}
const TEXTS = (names) => kinds("text", names);
const COUNTS = (names) => kinds("count", names);

// A recording as the claim hands it out (its queue fields, never content: ST7), each a column.
const RECORD = Object.assign(
  TEXTS(["id", "owner", "title", "state", "halted_at", "halt_code", "claim_token", "language_hint", "language"]),
  COUNTS(["state_entered_at", "attempts", "claim_expires_at", "paused_until", "progress_at", "lease_ended_at", "duration_ms"]),
  { progress: "fraction" },
);
// A follow-up queue's row (lib/followups.js; its own columns), and what the claim adds from its recording.
const FOLLOW_UP = Object.assign(
  TEXTS(["id", "state", "halted_at", "halt_code", "claim_token"]),
  COUNTS(["state_entered_at", "attempts", "claim_expires_at", "paused_until", "progress_at", "lease_ended_at"]),
  { progress: "fraction" },
);
const INSIGHTS = FOLLOW_UP;
// What the claim adds to a follow-up row from its recording (never the transcript: ST7).
const OF_RECORDING = ["owner", "title", "language"];
const FOLLOW_UP_CLAIMED = Object.assign({}, FOLLOW_UP, TEXTS(["recording"].concat(OF_RECORDING)));
const INSIGHTS_CLAIMED = FOLLOW_UP_CLAIMED;
// A recording's rows as the claim brings them (PocketBase's JSON of each record).
const FILE = Object.assign(
  TEXTS(["id", "record", "role", "format", "blob", "name", "location", "created"]),
  COUNTS(["size", "duration_ms", "piece", "pieces", "offset_ms", "speech_ms", "removed_at"]),
  { superseded: "flag", speech: "speech" },
);
const ATTEMPT = Object.assign(
  TEXTS(["id", "record", "provider", "model", "operation_id", "audio_uri", "status", "raw_response", "created",
    "copies_error"]),
  COUNTS(["piece", "offset_ms", "copies_removed_at"]),
);

// The row of each queue as the claim hands it out (and the settle route answers it), one
// JSON text of the fields above: SQLite writes every column with its real type (a
// fractional progress stays a float, a large counter an integer), so no value a running
// system stores can fail the read. A DynamicModel shape fixes each column's Go type
// instead, and one record whose value did not fit that shape failed every claim behind it.
function pairs(names) {
  return names.map((f) => "'" + f + "', " + f).join(", ");
}
// A follow-up row's: its recording's fields are null when that recording is gone.
function followUpJson(table) {
  return "json_object('recording', record, " + pairs(Object.keys(FOLLOW_UP)) + ", " +
    OF_RECORDING.map((f) => "'" + f + "', (SELECT a." + f + " FROM audio_records a WHERE a.id = " + table + ".record)").join(", ") + ")";
}
const CLAIMED_JSON = { audio_records: "json_object(" + pairs(Object.keys(RECORD)) + ")" };
for (const table of followups.names()) CLAIMED_JSON[table] = followUpJson(table);

// The SQL that holds when every column of `shape` stores its kind (columns only: text,
// count, fraction). Written once per table, in the claim's UPDATE and its probe.
function storedSql(shape) {
  const parts = [];
  for (const name in shape) {
    const kind = shape[name];
    const number = "typeof(" + name + ") IN ('integer', 'real')";
    if (kind === "text") parts.push("typeof(" + name + ") = 'text'");
    else if (kind === "count") parts.push("(" + number + " AND " + name + " BETWEEN 0 AND " + MAX_COUNT + " AND " + name + " = round(" + name + "))");
    else if (kind === "fraction") parts.push("(" + number + " AND " + name + " BETWEEN 0 AND 1)");
  }
  return parts.join(" AND ");
}

// Every column of `shape` as [its SQLite type, its value as an SQL literal]: text whatever it
// holds (a BLOB included), for saying what is wrong.
function storedJson(shape) {
  return "json_object(" + Object.keys(shape).map((n) => "'" + n + "', json_array(typeof(" + n + "), quote(" + n + "))").join(", ") + ")";
}

function fits(kind, v) {
  if (kind === "text") return typeof v === "string";
  if (kind === "count") return typeof v === "number" && isFinite(v) && v >= 0 && v <= MAX_COUNT && Math.floor(v) === v;
  if (kind === "fraction") return typeof v === "number" && isFinite(v) && v >= 0 && v <= 1;
  if (kind === "flag") return typeof v === "boolean";
  if (kind === "speech") {
    return v === null || (Array.isArray(v) && v.every((p) => Array.isArray(p) && p.length === 2 && fits("count", p[0]) && fits("count", p[1])));
  }
  return false;
}

function said(v) {
  if (v === null) return "null";
  if (typeof v === "string") return "text " + JSON.stringify(v.length > 60 ? v.slice(0, 60) + "…" : v);
  if (typeof v === "number") return "the number " + String(v);
  const json = JSON.stringify(v);
  return "the JSON " + (json.length > 60 ? json.slice(0, 60) + "…" : json);
}

// What is wrong with `obj` (a claimed row as JSON) by `shape`, in words ([] when nothing):
// a field it does not hold is no fault (the reader has a default for it).
function misfits(shape, obj, where) {
  const out = [];
  if (obj === null || typeof obj !== "object") return [(where || "the row") + " is " + said(obj) + ", not a row"];
  for (const name in shape) {
    if (!(name in obj) || fits(shape[name], obj[name])) continue;
    out.push((where || "") + name + " holds " + said(obj[name]) + " where " + WANTED[shape[name]] + " belongs");
  }
  return out;
}

// What is wrong with the stored row `id` of `table` by `shape`, from SQL's own view of it
// (its types, and values as literals: a BLOB is no JSON).
function storedMisfits(db, table, shape, id) {
  const rows = arrayOf(new DynamicModel({ row: "" }));
  db.newQuery("SELECT " + storedJson(shape) + " AS row FROM " + table + " WHERE id = {:id}").bind({ id: id }).all(rows);
  if (rows.length === 0) return [];
  const stored = JSON.parse(rows[0].row);
  const out = [];
  for (const name in shape) {
    const type = stored[name][0];
    const literal = stored[name][1].length > 60 ? stored[name][1].slice(0, 60) + "…" : stored[name][1];
    const number = type === "integer" || type === "real";
    const value = number ? Number(literal) : null;
    const ok = shape[name] === "text" ? type === "text" : number && fits(shape[name], value);
    if (!ok) out.push(name + " holds " + (type === "blob" ? "a BLOB" : type) + " " + literal + " where " + WANTED[shape[name]] + " belongs");
  }
  return out;
}

// What is wrong with a recording's rows as the claim brings them.
function rowsMisfits(rows) {
  let out = [];
  for (const f of rows.files || []) out = out.concat(misfits(FILE, f, "file " + (f && f.id) + ": "));
  for (const a of rows.attempts || []) out = out.concat(misfits(ATTEMPT, a, "attempt " + (a && a.id) + ": "));
  return out;
}

module.exports = {
  MAX_COUNT: MAX_COUNT, RECORD: RECORD, INSIGHTS: INSIGHTS, INSIGHTS_CLAIMED: INSIGHTS_CLAIMED, CLAIMED_JSON: CLAIMED_JSON,
  FOLLOW_UP: FOLLOW_UP, FOLLOW_UP_CLAIMED: FOLLOW_UP_CLAIMED,
  storedSql: storedSql, misfits: misfits, storedMisfits: storedMisfits, rowsMisfits: rowsMisfits,
};
