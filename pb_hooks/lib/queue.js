// The claim protocol and the fenced writes (SPEC P1–P11).
//
// Every write a worker makes is conditional on its claim token and is checked
// and applied inside one transaction on PocketBase's single write connection,
// so a worker whose claim went to someone else (lease expired, the owner
// cleared a halt) writes nothing. A rule-guarded PATCH does not give this: the
// rule is checked outside the write (see docs/architecture.md).
//
// Time comes from the caller (`now`, unix ms) so that the sidecar's injected
// clock drives leases, pauses and watchdogs alike.
//
// `available_at` is the claim's single sort key: when the record becomes
// claimable; 0 = never (terminal or halted). Each write below keeps it. A
// record claimable right away (uploaded, advanced, released, resumed) gets its
// creation time, so those are taken in creation order (P4, P13: the oldest
// recording is finished first); a paused, leased or retried one gets the
// moment it may be taken again, which keeps it out of the claim's index range
// until then.
const records = require(`${__hooks}/lib/records.js`);
const live = require(`${__hooks}/lib/live.js`);
const stages = require(`${__hooks}/lib/stages.js`);
const readable = require(`${__hooks}/lib/readable.js`);

class Fenced extends Error {}
class Invalid extends Error {}
// A row the claim met that a claimer could not read (lib/readable.js): `what` says why.
class Unreadable extends Error {
  constructor(table, id, what) {
    super(what.length > 0 ? what.join("; ") : "a field holds a value of another type");
    this.table = table;
    this.id = id;
  }
}

// The record's creation time in unix ms: the claim key of a record that is
// claimable right away. The one place it is computed.
function createdMs(rec) {
  return rec.getDateTime("created").time().unixMilli();
}

// Puts a just-saved new record in the queue at its creation time (inside the caller's transaction).
function enqueue(tx, rec, table) {
  tx.db().newQuery("UPDATE " + (table === "insights" ? "insights" : "audio_records") + " SET available_at = {:at} WHERE id = {:id}")
    .bind({ id: rec.id, at: createdMs(rec) }).execute();
}

function dbTime(ms) {
  return new Date(ms).toISOString().replace("T", " ");
}

// H7: every number a fenced route takes is a time in ms, a duration or a count;
// beyond the year 9999 none is meaningful, and a record holding one could no
// longer be saved from the panel.
const MAX_NUMBER = Date.UTC(9999, 11, 31);
const MAX_LEASE = 366 * 24 * 3600 * 1000;

function intArg(body, name) {
  const v = body[name];
  if (typeof v !== "number" || !isFinite(v) || v < 0 || v > MAX_NUMBER) {
    throw new Invalid("'" + name + "' must be a number from 0 to " + MAX_NUMBER);
  }
  return Math.floor(v);
}

function strArg(body, name, max) {
  const v = body[name];
  if (typeof v !== "string" || v === "") throw new Invalid("'" + name + "' is required");
  return v.slice(0, max || 5000);
}

function stageValues(app, table) {
  return app.findCachedCollectionByNameOrId(table || "audio_records").fields.getByName("state").values;
}

// The two queues. A recording's stages live on `audio_records`; the optional
// insights step (brief and topics of a finished recording) on `insights`, one
// row per recording, with the same queue fields and the same transitions. A
// journal row is always the recording's: `journal(rec)` gives [recording id, stage].
const QUEUES = {
  audio_records: { journal: (rec) => [rec.id, rec.getString("state")] },
  insights: { journal: (rec) => [rec.getString("record"), "insights"] },
};

function queueOf(table) {
  if (!QUEUES[table]) throw new Invalid("no queue '" + table + "'");
  return QUEUES[table];
}

// What a claimer may have back with the claim (the queue fields, never content: ST7).
const CLAIMED_FIELDS = [
  "id", "owner", "title", "state", "state_entered_at", "halted_at", "halt_code", "attempts", "claim_token",
  "claim_expires_at", "paused_until", "language_hint", "language", "progress", "progress_at", "lease_ended_at",
  "duration_ms",
];

// The claimed row as one JSON text: SQLite writes every column with its real
// type (a fractional progress stays a float, a large counter an integer), so
// no value a running system stores can fail the read. A DynamicModel shape
// fixes each column's Go type instead, and one record whose value did not fit
// that shape failed every claim behind it.
const CLAIMED_JSON = "json_object(" + CLAIMED_FIELDS.map((f) => "'" + f + "', " + f).join(", ") + ")";

// A pause or a lease end that is no time at all (text, a BLOB, past any time) ends now: the
// record comes to the claim, which sets it aside (it would otherwise wait for ever, unseen).
function endedSql(column) {
  return "(" + column + " <= {:now} OR typeof(" + column + ") NOT IN ('integer', 'real') OR " + column + " > " +
    readable.MAX_COUNT + ")";
}

// The claim's filter and order: the next claimable record of the given stages.
function headQuery(names) {
  return "SELECT id FROM audio_records INDEXED BY idx_audio_records_claim" +
    " WHERE available_at > 0 AND available_at <= {:now} AND halted_at = ''" +
    " AND " + endedSql("paused_until") + " AND " + endedSql("claim_expires_at") +
    " AND state IN (" + names.join(", ") + ")" +
    " ORDER BY available_at, id LIMIT 1";
}

// The id the head query `sql` finds (inside the caller's transaction), or "".
function headOf(db, sql, params) {
  const head = arrayOf(new DynamicModel({ id: "" }));
  db.newQuery(sql).bind(params).all(head);
  return head.length > 0 ? head[0].id : "";
}

// The claim's parameters and its SQL pieces for `leases` (stage → lease ms).
function claimPlan(app, now, leases) {
  const valid = stageValues(app);
  const params = { now: now, upd: dbTime(now), token: $security.randomString(40) };
  const names = [];
  let leaseCase = "CASE state";
  let i = 0;
  for (const stage in leases) {
    if (valid.indexOf(stage) < 0 || stages.isTerminal(stage)) throw new Invalid("unknown or terminal stage '" + stage + "'");
    const lease = Math.floor(leases[stage]);
    if (!(lease > 0 && lease <= MAX_LEASE)) throw new Invalid("lease of '" + stage + "' must be from 1 to " + MAX_LEASE + " ms");
    params["s" + i] = stage;
    params["l" + i] = lease;
    names.push("{:s" + i + "}");
    leaseCase += " WHEN {:s" + i + "} THEN {:now} + {:l" + i + "}";
    i++;
  }
  if (i === 0) throw new Invalid("'leases' names no stage");
  leaseCase += " END";
  return { params: params, names: names, leaseCase: leaseCase };
}

// P1–P4: one UPDATE … WHERE id = (SELECT … ORDER BY available_at, id LIMIT 1)
// inside a transaction. `leases` maps each claimable stage to its lease (ms);
// the stage table lives in the sidecar and is sent with every claim.
//
// The UPDATE takes the head only if it stores what a claimer reads
// (lib/readable.js): a head that does not is named by an Unreadable, as is one
// whose claimed JSON or rows (`withRows`: the recording's files and attempts,
// read in the same transaction) a claimer could not read; the throw rolls the
// claim back, and `claim` sets the row aside.
function claimOnce(app, plan, withRows) {
  const sql =
    // lease_ended_at: the previous claim's lease end (SET reads the row as it was).
    "UPDATE audio_records SET lease_ended_at = claim_expires_at, claim_token = {:token}, claim_expires_at = " +
    plan.leaseCase +
    ", available_at = " + plan.leaseCase +
    // A new claim starts with no reported activity: the poll derives it until the step says more.
    ", attempts = attempts + 1, activity = '', updated = {:upd}" +
    // INDEXED BY: left to itself SQLite picks the state index and sorts every
    // claimable row, leased and paused ones included (measured: 142x slower at
    // 1M rows). The claim index's range skips them.
    " WHERE id = (" + headQuery(plan.names) + ") AND " + readable.storedSql(readable.RECORD) +
    " RETURNING " + CLAIMED_JSON + " AS row";
  let out = null;
  app.runInTransaction((tx) => {
    const rows = arrayOf(new DynamicModel({ row: "" }));
    tx.db().newQuery(sql).bind(plan.params).all(rows);
    if (rows.length === 0) {
      // Nothing claimed: nothing is due, or the head stores a value of another kind.
      const head = headOf(tx.db(), headQuery(plan.names), plan.params);
      if (head) throw new Unreadable("audio_records", head, readable.storedMisfits(tx.db(), "audio_records", readable.RECORD, head));
      return;
    }
    const record = JSON.parse(rows[0].row);
    let wrong = readable.misfits(readable.RECORD, record);
    let related = null;
    if (withRows) {
      // As the route answers them (each record's JSON), checked before they leave.
      related = JSON.parse(JSON.stringify(records.rowsOf(tx, record.id)));
      wrong = wrong.concat(readable.rowsMisfits(related));
    }
    if (wrong.length > 0) throw new Unreadable("audio_records", record.id, wrong);
    // The claimed record's activity changed (queued → normalizing, …).
    live.publish(tx, record.id);
    out = { id: record.id, token: record.claim_token, record: record };
    if (related) out.rows = related;
  });
  return out;
}

// What an insights claimer has back: the row's queue fields and, from its
// recording, the owner, title and language (never the transcript: ST7).
const INSIGHTS_FIELDS = [
  "id", "state", "state_entered_at", "halted_at", "halt_code", "attempts", "claim_token", "claim_expires_at",
  "paused_until", "progress", "progress_at",
];
const OF_RECORDING = ["owner", "title", "language"];
const INSIGHTS_JSON = "json_object('recording', record, " +
  INSIGHTS_FIELDS.map((f) => "'" + f + "', " + f).join(", ") + ", " +
  OF_RECORDING.map((f) => "'" + f + "', (SELECT a." + f + " FROM audio_records a WHERE a.id = insights.record)").join(", ") + ")";

// The next insights row to work on, claimed like a recording (one statement,
// its own index, the same checks): only ever after every claimable recording (see `claim`).
function claimInsights(app, now, lease) {
  if (!(lease > 0 && lease <= MAX_LEASE)) throw new Invalid("'insights_lease' must be from 1 to " + MAX_LEASE + " ms");
  const head = "SELECT id FROM insights INDEXED BY idx_insights_claim" +
    " WHERE available_at > 0 AND available_at <= {:now} AND halted_at = '' AND " + endedSql("paused_until") +
    " AND " + endedSql("claim_expires_at") + " AND state = {:queued} ORDER BY available_at, id LIMIT 1";
  const sql =
    "UPDATE insights SET claim_token = {:token}, claim_expires_at = {:now} + {:lease}, available_at = {:now} + {:lease}" +
    ", attempts = attempts + 1, activity = '', updated = {:upd}" +
    " WHERE id = (" + head + ") AND " + readable.storedSql(readable.INSIGHTS) +
    " RETURNING " + INSIGHTS_JSON + " AS row";
  const params = { now: now, lease: Math.floor(lease), upd: dbTime(now), token: $security.randomString(40), queued: stages.QUEUED };
  let out = null;
  app.runInTransaction((tx) => {
    const rows = arrayOf(new DynamicModel({ row: "" }));
    tx.db().newQuery(sql).bind(params).all(rows);
    if (rows.length === 0) {
      const id = headOf(tx.db(), head, params);
      if (id) throw new Unreadable("insights", id, readable.storedMisfits(tx.db(), "insights", readable.INSIGHTS, id));
      return;
    }
    const record = JSON.parse(rows[0].row);
    // Its recording's owner, title and language come with it: null when that recording is gone.
    const wrong = readable.misfits(readable.INSIGHTS_CLAIMED, record);
    if (wrong.length > 0) throw new Unreadable("insights", record.id, wrong);
    out = { id: record.id, token: record.claim_token, queue: "insights", record: record };
  });
  return out;
}

// A recording just done gets its insights row queued (or queued again: the
// owner had it recognized anew), inside the caller's transaction.
function queueInsights(tx, recordId, now) {
  const found = tx.findRecordsByFilter("insights", "record = {:id}", "", 1, 0, { id: recordId });
  if (found.length > 0) {
    const row = found[0];
    const fields = fieldsOf(row, "stage_set", now, { to: stages.QUEUED });
    for (const f in fields) row.set(f, fields[f]);
    row.set("halted_at", "");
    row.set("halt_code", "");
    row.set("halt_reason", "");
    row.set("available_at", createdMs(row));
    tx.save(row);
    return row;
  }
  const row = new Record(tx.findCollectionByNameOrId("insights"));
  row.set("record", recordId);
  row.set("state", stages.QUEUED);
  row.set("state_entered_at", now);
  tx.save(row);
  enqueue(tx, row, "insights");
  return row;
}

// The halt code of a record the claim could not read (see setAside).
const UNCLAIMABLE = "unclaimable";
// At most this many records are set aside by one claim request (the claimer comes back at once).
const MAX_SET_ASIDE = 5;

// Defence in depth: a claim that meets a row a claimer could not read (its
// own data: a value of another kind, a BLOB, JSON that is none) sets that row
// aside (halted, what is wrong in its journal) and claims the next, so the
// queue behind it keeps moving. Returns the claim (or null), the ids set
// aside, and `more` when it stopped setting aside before finding work; an
// error that is not one row's stays the caller's error.
//
// `insightsLease` (ms, or 0): the caller also takes insights work, but only
// when no recording is claimable: the optional step never delays a transcript.
// `withRows`: a claimed recording comes with its files and attempts.
function claim(app, now, leases, insightsLease, withRows) {
  const plan = claimPlan(app, now, leases);
  const setAside = [];
  let tries = 0;
  for (;;) {
    try {
      const got = claimOnce(app, plan, withRows === true) || (insightsLease ? claimInsights(app, now, insightsLease) : null);
      return { claimed: got, setAside: setAside, more: false };
    } catch (err) {
      if (err instanceof Invalid) throw err;
      let culprit = null;
      if (err instanceof Unreadable) {
        culprit = { table: err.table, id: err.id };
      } else {
        const id = unreadableHead(app, plan);
        if (id) culprit = { table: "audio_records", id: id };
      }
      if (!culprit) throw err;
      // Another claim may have set it aside the moment before: then it is not named here again.
      if (setAsideRecord(app, culprit.table, culprit.id, now, String(err && err.message ? err.message : err))) setAside.push(culprit.id);
      if (++tries >= MAX_SET_ASIDE) return { claimed: null, setAside: setAside, more: true };
    }
  }
}

// The id of the record at the head of the claim's order if that record's own
// claimed fields cannot be read as JSON, else "" (the failure lies elsewhere).
function unreadableHead(app, plan) {
  const head = headOf(app.db(), headQuery(plan.names), plan.params);
  if (!head) return "";
  try {
    const probe = arrayOf(new DynamicModel({ row: "" }));
    app.db().newQuery("SELECT " + CLAIMED_JSON + " AS row FROM audio_records WHERE id = {:id}")
      .bind({ id: head }).all(probe);
    if (probe.length > 0) JSON.parse(probe[0].row);
    return "";
  } catch (_) {
    return head;
  }
}

// Halts a row (a recording, or an insights row) the claim cannot read, with the error in the
// recording's journal. Raw SQL: loading the row as a model might fail on the same data. Returns
// whether this call halted it: two claims that met the row at once both come here, and only the
// first halts, journals and names it.
function setAsideRecord(app, table, id, now, error) {
  const what = table === "insights" ? "insights row" : "record";
  const reason = "the claim could not read this " + what + " (" + String(error).slice(0, 1500) + "); " +
    "fix the field in the panel, then clear the halt";
  let halted = false;
  app.runInTransaction((tx) => {
    const result = tx.db().newQuery(
      "UPDATE " + (table === "insights" ? "insights" : "audio_records") + " SET halted_at = {:at}, halt_code = {:code}, " +
      "halt_reason = {:reason}, claim_token = '', claim_expires_at = 0, available_at = 0, queue_rev = queue_rev + 1, " +
      "updated = {:at} WHERE id = {:id} AND halted_at = ''",
    ).bind({ id: id, at: dbTime(now), code: UNCLAIMABLE, reason: reason }).execute();
    halted = result.rowsAffected() > 0;
    if (!halted) return;
    if (table === "insights") {
      // Journalled on its recording, if that still exists.
      const rows = arrayOf(new DynamicModel({ record: "" }));
      tx.db().newQuery("SELECT CAST(i.record AS TEXT) AS record FROM insights i JOIN audio_records a ON a.id = i.record" +
        " WHERE i.id = {:id}").bind({ id: id }).all(rows);
      if (rows.length > 0) records.journal(tx, rows[0].record, stages.INSIGHTS_JOURNAL_STAGE, "halted", UNCLAIMABLE + ": " + reason, "worker");
      return;
    }
    const rows = arrayOf(new DynamicModel({ state: "" }));
    tx.db().newQuery("SELECT CAST(state AS TEXT) AS state FROM audio_records WHERE id = {:id}").bind({ id: id }).all(rows);
    records.journal(tx, id, rows.length > 0 ? rows[0].state : "", "halted", UNCLAIMABLE + ": " + reason, "worker");
    live.publish(tx, id);
  });
  if (halted) app.logger().error("claim: " + what + " set aside, its fields could not be read", "table", table, "id", id, "error", String(error));
  return halted;
}

// When the next record becomes claimable (ms), or 0 if none is waiting.
// `insights`: the caller takes insights work too, so their rows count.
function nextAvailableAt(app, now, insights) {
  const row = new DynamicModel({ next: 0 });
  const of = (table) => "SELECT available_at FROM " + table + " WHERE available_at > {:now}";
  app.db()
    .newQuery("SELECT COALESCE(MIN(available_at), 0) AS next FROM (" + of("audio_records") +
      (insights ? " UNION ALL " + of("insights") : "") + ")")
    .bind({ now: now })
    .one(row);
  return row.next;
}

// The queue transitions, each defined once as the fields it sets, from the
// stored record and `now`. The settle route (below) and the owner's panel
// edits (lib/panel.js) apply the same definitions. Each key is the one name
// of that change everywhere: the settle route's `outcome`, the journal's
// `kind`, the sidecar's `Outcome` (sidecar/outcome.py) and its metrics label.
// A claim ends: what its holder reported doing (`activity`) ends with it.
const FREE = { claim_token: "", claim_expires_at: 0, activity: "" };

const TRANSITIONS = {
  // A step finished: the next stage, its clock restarted, attempts afresh.
  advanced: (rec, now, a) => Object.assign({}, FREE, {
    state: a.to, state_entered_at: now, attempts: 0, paused_until: 0,
    queue_rev: rec.getInt("queue_rev") + 1, available_at: stages.isTerminal(a.to) ? 0 : createdMs(rec),
    progress: stages.isTerminal(a.to) ? 1 : rec.getFloat("progress"),
  }),
  // P10: not a transition of the stage; its clock keeps running.
  postponed: (rec, now, a) => Object.assign({}, FREE, { paused_until: a.until, attempts: 0, available_at: a.until }),
  // P11: a flag, never a stage.
  halted: (rec, now, a) => Object.assign({}, FREE, {
    halted_at: dbTime(now), halt_code: a.code, halt_reason: String(a.reason).slice(0, 2000),
    queue_rev: rec.getInt("queue_rev") + 1, available_at: 0,
  }),
  // A failed try: the attempt stays spent; claimable again from `retry_at`.
  failed: (rec, now, a) => Object.assign({}, FREE, { available_at: Math.max(a.retry_at, now) }),
  // P8: our own shutdown is no verdict; the claim's attempt is given back.
  released: (rec) => Object.assign({}, FREE, {
    attempts: Math.max(rec.getInt("attempts") - 1, 0), available_at: createdMs(rec),
  }),
  // The claim goes on: a long step still runs.
  extended: (rec, now, a) => ({ claim_expires_at: a.until, available_at: a.until }),
  // The claim goes on. LA4: how far recognition has come; it never goes back.
  // Moving progress also tells the stall watchdog the step is alive (progress_at).
  // With it, optionally, what the step is doing now and the language it found
  // (both checked against the schema's lists by its settle arguments below).
  progressed: (rec, now, a) => Object.assign(
    a.progress > rec.getFloat("progress") ? { progress: a.progress, progress_at: now } : { progress: rec.getFloat("progress") },
    a.activity ? { activity: a.activity } : {},
    a.language ? { language: a.language } : {},
  ),
  // The owner clears the halt: the stage resumes with a fresh count and clock (ST6).
  resumed: (rec, now) => Object.assign({}, FREE, {
    halted_at: "", halt_code: "", halt_reason: "", state_entered_at: now, paused_until: 0, attempts: 0,
    queue_rev: rec.getInt("queue_rev") + 1, available_at: stages.isTerminal(rec.getString("state")) ? 0 : createdMs(rec),
  }),
  // The owner sets the stage: it restarts from there (unless the record is halted).
  stage_set: (rec, now, a) => Object.assign({}, FREE, {
    state: a.to, state_entered_at: now, paused_until: 0, attempts: 0, queue_rev: rec.getInt("queue_rev") + 1,
    available_at: rec.getString("halted_at") !== "" || stages.isTerminal(a.to) ? 0 : createdMs(rec),
    progress: stages.isTerminal(a.to) ? 1 : 0,  // the work starts over
  }),
};

// The fields of `transition` applied to the stored record, inside the caller's transaction.
function fieldsOf(rec, transition, now, args) {
  return TRANSITIONS[transition](rec, now, args || {});
}

// Checks the fence inside one transaction, then `work(tx, rec)` (attachments,
// transitions). Throws Fenced when the claim is no longer the caller's.
function underFence(app, id, token, work, table) {
  let out = null;
  app.runInTransaction((tx) => {
    let rec;
    try {
      rec = tx.findRecordById(table || "audio_records", id);
    } catch (_) {
      throw new Fenced("no such record");
    }
    if (token === "" || rec.getString("claim_token") !== token) throw new Fenced("claim token no longer matches");
    out = work(tx, rec);
  });
  return out;
}

// The UPDATE's SET list and parameters for `fields` (and `updated`).
function setClause(id, fields, now, guardParams) {
  const params = Object.assign({ id: id, upd: dbTime(now) }, guardParams);
  const sets = [];
  for (const f in fields) {
    params["v_" + f] = fields[f];
    sets.push(f + " = {:v_" + f + "}");
  }
  return { sql: sets.join(", ") + ", updated = {:upd}", params: params };
}

// Writes `fields` to the record `id` (and `updated`), inside the caller's
// transaction, only where `guard` (SQL over `params`) still holds.
function writeFields(tx, id, fields, now, guard, guardParams, table) {
  const set = setClause(id, fields, now, guardParams);
  tx.db()
    .newQuery("UPDATE " + (table || "audio_records") + " SET " + set.sql + " WHERE id = {:id} AND " + guard)
    .bind(set.params)
    .execute();
}

// Each queue's row as a claimer reads it: the same JSON the claim hands out.
const ROW_JSON = { audio_records: CLAIMED_JSON, insights: INSIGHTS_JSON };

// A number from 0 to 1.
function fractionArg(body, name) {
  const v = body[name];
  if (typeof v !== "number" || !isFinite(v) || v < 0 || v > 1) throw new Invalid("'" + name + "' must be a number from 0 to 1");
  return v;
}

function optStrArg(body, name, max) {
  const v = body[name];
  return v === undefined || v === null ? null : String(v).slice(0, max || 5000);
}

function laterArg(body, name, now) {
  const v = intArg(body, name);
  if (v <= now) throw new Invalid("'" + name + "' must be later than 'now'");
  return v;
}

// What a claim's holder may settle, one entry per name: `args` reads and
// checks the request body (app, body, now, table), `journal` says what the
// record's journal gets (null: nothing; the claim-keeping ones write none),
// `after` does the rest inside the same transaction. Every entry is applied
// by `settle`, fenced.
const OUTCOMES = {
  advanced: {
    args: (app, body, now, table) => {
      const to = strArg(body, "to", 50);
      if (stageValues(app, table).indexOf(to) < 0) throw new Invalid("unknown stage '" + to + "'");
      return { to: to, text: optStrArg(body, "text"), insights: body.insights === true };
    },
    journal: (a, table) => [table === "insights" ? stages.INSIGHTS_JOURNAL_STAGE : a.to,
      a.text || (table === "insights" ? "insights done" : "entered " + a.to)],
    // A recording entering its terminal stage gets its insights queued (the caller has them on).
    after: (tx, table, rec, a, now) => {
      if (table !== "audio_records" || a.insights !== true || !stages.isTerminal(a.to)) return;
      queueInsights(tx, rec.id, now);
      records.journal(tx, rec.id, a.to, "note", "brief and topics queued (the insights step)", "worker");
    },
  },
  postponed: {
    args: (app, body, now) => ({ until: laterArg(body, "until", now), text: optStrArg(body, "text") }),
    journal: (a) => [null, a.text || "postponed"],
  },
  halted: {
    args: (app, body, now, table) => {
      const code = strArg(body, "code", 50);
      const codes = app.findCachedCollectionByNameOrId(table).fields.getByName("halt_code").values;
      if (codes.indexOf(code) < 0) throw new Invalid("unknown halt code '" + code + "'");
      return { code: code, reason: strArg(body, "reason", 2000) };
    },
    journal: (a) => [null, a.code + ": " + a.reason],
  },
  failed: {
    args: (app, body) => ({ retry_at: intArg(body, "retry_at"), text: optStrArg(body, "text") || "step failed" }),
    journal: (a) => [null, a.text],
  },
  released: {
    args: () => ({}),
    journal: () => [null, "released on shutdown; attempt not counted"],
  },
  extended: {
    args: (app, body, now) => ({ until: laterArg(body, "until", now) }),
    journal: null,
  },
  progressed: {
    // `activity`: one of the schema's activities that describe work; anything else is refused.
    // `language`: kept only when it is a code of the schema's list, as the texts route does.
    // An insights row keeps its progress alone.
    args: (app, body, now, table) => {
      const value = fractionArg(body, "progress");
      if (table === "insights") return { progress: value, activity: null, language: null };
      const activity = optStrArg(body, "activity", 50);
      const reported = records.activities(app).filter((v) => records.DERIVED_ONLY.indexOf(v) < 0);
      if (activity !== null && reported.indexOf(activity) < 0) throw new Invalid("'activity' must be one of " + reported.join(", "));
      const language = optStrArg(body, "language", 10);
      return { progress: value, activity: activity, language: language !== null && records.languages(app).indexOf(language) >= 0 ? language : null };
    },
    journal: null,
  },
};

// The names `settle` takes, in the order the docs list them.
const OUTCOME_NAMES = Object.keys(OUTCOMES);

// The one fenced write of a claim's holder: `outcome` (a name of OUTCOMES)
// with its arguments from `body`, applied to the row `id` of `table` in one
// transaction only while `token` is still its claim token (else Fenced), with
// its journal row. Returns the written row as the claim hands it out (the
// caller need not read it again). The row is not read again here either: the
// UPDATE returns it.
function settle(app, table, id, token, now, outcome, body) {
  queueOf(table);
  const spec = OUTCOMES[outcome];
  if (!spec) throw new Invalid("'outcome' must be one of " + OUTCOME_NAMES.join(", "));
  const a = spec.args(app, body, now, table);
  return underFence(app, id, token, (tx, rec) => {
    const set = setClause(id, fieldsOf(rec, outcome, now, a), now, { token: token });
    const rows = arrayOf(new DynamicModel({ row: "" }));
    tx.db().newQuery("UPDATE " + table + " SET " + set.sql + " WHERE id = {:id} AND claim_token = {:token}" +
      " RETURNING " + ROW_JSON[table] + " AS row").bind(set.params).all(rows);
    // The fence was checked in this transaction on the single write connection: the row is there.
    if (rows.length === 0) throw new Fenced("claim token no longer matches");
    if (spec.journal) {
      const said = spec.journal(a, table);
      const where = queueOf(table).journal(rec);
      records.journal(tx, where[0], said[0] || where[1], outcome, said[1], "worker");
    }
    if (spec.after) spec.after(tx, table, rec, a, now);
    // A longer lease shows nothing new to the sender; insights rows have no live status.
    if (table === "audio_records" && outcome !== "extended") live.publish(tx, id, rec.getString("owner"));
    return JSON.parse(rows[0].row);
  }, table);
}

// The sender clears a halt of their own recording (POST /api/transcriber/records/{id}/resume):
// the owner's resume (ST6) and nothing else, in one transaction — claim released, attempts
// afresh, the recognitions already started kept (a lost one was marked failed when the
// record halted, so only that piece is recognized again: nothing is paid for twice),
// journalled as done by the sender. `check(tx, rec)` returns a refusal, or null to go on
// (having written what else the resume needs, in the same transaction: its quota's charge).
// Returns {refused} or {record}.
function resumeBySender(app, id, ownerId, now, check) {
  let out = null;
  app.runInTransaction((tx) => {
    let rec;
    try {
      rec = tx.findRecordById("audio_records", id);
    } catch (_) {
      rec = null;
    }
    if (!rec || rec.getString("owner") !== ownerId) {
      out = { refused: { status: 404, code: "not_found", message: "No such recording." } };
      return;
    }
    const refused = check(tx, rec);
    if (refused) {
      out = { refused: refused };
      return;
    }
    writeFields(tx, id, fieldsOf(rec, "resumed", now), now, "queue_rev = {:rev} AND halted_at != ''", { rev: rec.getInt("queue_rev") });
    records.journal(tx, id, rec.getString("state"), "resumed", "halt cleared by the sender (" + rec.getString("halt_code") + ")", "sender");
    const saved = tx.findRecordById("audio_records", id);
    live.publish(tx, saved);
    out = { record: saved };
  });
  return out;
}

// O4: the row a repeated write made the first time (same record, same key), or null.
function writtenBefore(tx, collection, recordId, key) {
  if (!key) return null;
  const rows = tx.findRecordsByFilter(collection, "record = {:id} && write_key = {:key}", "", 1, 0, { id: recordId, key: key });
  return rows.length > 0 ? rows[0] : null;
}

module.exports = {
  Fenced: Fenced, Invalid: Invalid, isTerminal: stages.isTerminal, dbTime: dbTime,
  intArg: intArg, strArg: strArg, claim: claim, enqueue: enqueue, nextAvailableAt: nextAvailableAt,
  underFence: underFence, fieldsOf: fieldsOf, writeFields: writeFields, resumeBySender: resumeBySender,
  writtenBefore: writtenBefore, queueInsights: queueInsights, settle: settle, OUTCOME_NAMES: OUTCOME_NAMES,
};
