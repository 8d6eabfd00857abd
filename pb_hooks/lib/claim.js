// The claim (SPEC P1–P4): one UPDATE … WHERE id = (SELECT … ORDER BY available_at, id
// LIMIT 1) inside a transaction hands the next claimable row to exactly one claimer, with
// a new claim token and a lease. PocketBase has one write connection, so racing claims
// serialize. `available_at` is the single sort key (lib/transitions.js).
//
// What a claimer must be able to read is declared in lib/readable.js and checked inside
// the claim's transaction; a row that fails is set aside (halted `unclaimable`) and the
// next is claimed, so the queue behind it keeps moving.
const args = require("./args.js");
const datetimes = require("./datetimes.js");
const followups = require("./followups.js");
const journal = require("./journal.js");
const live = require("./live.js");
const readable = require("./readable.js");
const records = require("./records.js");
const stages = require("./stages.js");

// A row the claim met that a claimer could not read (lib/readable.js): `what` says why.
class Unreadable extends Error {
  constructor(table, id, what) {
    super(what.length > 0 ? what.join("; ") : "a field holds a value of another type");
    this.table = table;
    this.id = id;
  }
}

// The longest lease a claim takes (ms).
const MAX_LEASE = 366 * 24 * 3600 * 1000;

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
  const valid = stages.allowed(app, "audio_records");
  const params = { now: now, upd: datetimes.dbTime(now), token: $security.randomString(40) };
  const names = [];
  let leaseCase = "CASE state";
  let i = 0;
  for (const stage in leases) {
    if (valid.indexOf(stage) < 0 || stages.isTerminal(stage)) throw new args.Invalid("unknown or terminal stage '" + stage + "'");
    const lease = Math.floor(leases[stage]);
    if (!(lease > 0 && lease <= MAX_LEASE)) throw new args.Invalid("lease of '" + stage + "' must be from 1 to " + MAX_LEASE + " ms");
    params["s" + i] = stage;
    params["l" + i] = lease;
    names.push("{:s" + i + "}");
    leaseCase += " WHEN {:s" + i + "} THEN {:now} + {:l" + i + "}";
    i++;
  }
  if (i === 0) throw new args.Invalid("'leases' names no stage");
  leaseCase += " END";
  return { params: params, names: names, leaseCase: leaseCase };
}

// The stall watchdog's clock (the sidecar's runner) runs from the stage's entry or its last
// progress. The first try in a stage (no attempt spent, never postponed there) moves it to the
// claim: the time before was a wait in the queue (a backlog, the service down), and a try killed
// later must not be charged with it. A postponed stage's clock keeps running (P10).
const FIRST_TRY_STARTS = "CASE WHEN attempts = 0 AND paused_until = 0 THEN {:now} ELSE progress_at END";

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
    ", progress_at = " + FIRST_TRY_STARTS +
    // INDEXED BY: left to itself SQLite picks the state index and sorts every
    // claimable row, leased and paused ones included (measured: 142x slower at
    // 1M rows). The claim index's range skips them.
    " WHERE id = (" + headQuery(plan.names) + ") AND " + readable.storedSql(readable.RECORD) +
    " RETURNING " + readable.CLAIMED_JSON.audio_records + " AS row";
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

// The follow-up queues a claim takes (lib/followups.js), in their declared order, each
// with its lease (ms): `asked` maps queue names to leases.
function followUpPlan(asked) {
  if (asked === undefined || asked === null) return [];
  if (typeof asked !== "object") throw new args.Invalid("'follow_ups' must map follow-up queues to lease milliseconds");
  for (const name in asked) {
    if (!followups.of(name)) throw new args.Invalid("unknown follow-up queue '" + name + "' (queues: " + followups.names().join(", ") + ")");
    const lease = Math.floor(asked[name]);
    if (!(lease > 0 && lease <= MAX_LEASE)) throw new args.Invalid("lease of '" + name + "' must be from 1 to " + MAX_LEASE + " ms");
  }
  return followups.names().filter((name) => asked[name] !== undefined).map((name) => ({ table: name, lease: Math.floor(asked[name]) }));
}

// The next row of follow-up queue `table` to work on, claimed like a recording (one
// statement, its own index, the same checks): only ever after every claimable recording (see `claim`).
function claimFollowUp(app, now, table, lease) {
  const head = "SELECT id FROM " + table + " INDEXED BY idx_" + table + "_claim" +
    " WHERE available_at > 0 AND available_at <= {:now} AND halted_at = '' AND " + endedSql("paused_until") +
    " AND " + endedSql("claim_expires_at") + " AND state = {:queued} ORDER BY available_at, id LIMIT 1";
  const sql =
    // lease_ended_at: the previous claim's lease end, as a recording's claim keeps it (see claimOnce).
    "UPDATE " + table + " SET lease_ended_at = claim_expires_at, claim_token = {:token}, claim_expires_at = {:now} + {:lease}" +
    ", available_at = {:now} + {:lease}" +
    ", attempts = attempts + 1, activity = '', updated = {:upd}" +
    ", progress_at = " + FIRST_TRY_STARTS +
    " WHERE id = (" + head + ") AND " + readable.storedSql(readable.FOLLOW_UP) +
    " RETURNING " + readable.CLAIMED_JSON[table] + " AS row";
  const params = { now: now, lease: Math.floor(lease), upd: datetimes.dbTime(now), token: $security.randomString(40), queued: stages.QUEUED };
  let out = null;
  app.runInTransaction((tx) => {
    const rows = arrayOf(new DynamicModel({ row: "" }));
    tx.db().newQuery(sql).bind(params).all(rows);
    if (rows.length === 0) {
      const id = headOf(tx.db(), head, params);
      if (id) throw new Unreadable(table, id, readable.storedMisfits(tx.db(), table, readable.FOLLOW_UP, id));
      return;
    }
    const record = JSON.parse(rows[0].row);
    // Its recording's owner, title and language come with it: null when that recording is gone.
    const wrong = readable.misfits(readable.FOLLOW_UP_CLAIMED, record);
    if (wrong.length > 0) throw new Unreadable(table, record.id, wrong);
    out = { id: record.id, token: record.claim_token, queue: table, record: record };
  });
  return out;
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
// `followUps` (queue → lease ms, lib/followups.js): the caller also takes the
// work of these follow-up queues, but only when no recording is claimable: a
// follow-up never delays a transcript. `withRows`: a claimed recording comes
// with its files and attempts.
function claim(app, now, leases, followUps, withRows) {
  const plan = claimPlan(app, now, leases);
  const queues = followUpPlan(followUps);
  const next = () => {
    for (const q of queues) {
      const got = claimFollowUp(app, now, q.table, q.lease);
      if (got) return got;
    }
    return null;
  };
  const setAside = [];
  let tries = 0;
  for (;;) {
    try {
      const got = claimOnce(app, plan, withRows === true) || next();
      return { claimed: got, setAside: setAside, more: false };
    } catch (err) {
      if (err instanceof args.Invalid) throw err;
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
    app.db().newQuery("SELECT " + readable.CLAIMED_JSON.audio_records + " AS row FROM audio_records WHERE id = {:id}")
      .bind({ id: head }).all(probe);
    if (probe.length > 0) JSON.parse(probe[0].row);
    return "";
  } catch (_) {
    return head;
  }
}

// Halts a row (a recording, or a follow-up row) the claim cannot read, with the error in the
// recording's journal. Raw SQL: loading the row as a model might fail on the same data. Returns
// whether this call halted it: two claims that met the row at once both come here, and only the
// first halts, journals and names it.
function setAsideRecord(app, table, id, now, error) {
  const queue = followups.of(table);
  const what = queue ? queue.what : "record";
  const reason = "the claim could not read this " + what + " (" + String(error).slice(0, 1500) + "); " +
    "fix the field in the panel, then clear the halt";
  let halted = false;
  app.runInTransaction((tx) => {
    const result = tx.db().newQuery(
      "UPDATE " + (queue ? table : "audio_records") + " SET halted_at = {:at}, halt_code = {:code}, " +
      "halt_reason = {:reason}, claim_token = '', claim_expires_at = 0, available_at = 0, queue_rev = queue_rev + 1, " +
      "updated = {:at} WHERE id = {:id} AND halted_at = ''",
    ).bind({ id: id, at: datetimes.dbTime(now), code: UNCLAIMABLE, reason: reason }).execute();
    halted = result.rowsAffected() > 0;
    if (!halted) return;
    if (queue) {
      // Journalled on its recording, if that still exists.
      const rows = arrayOf(new DynamicModel({ record: "" }));
      tx.db().newQuery("SELECT CAST(i.record AS TEXT) AS record FROM " + table + " i JOIN audio_records a ON a.id = i.record" +
        " WHERE i.id = {:id}").bind({ id: id }).all(rows);
      if (rows.length > 0) journal.add(tx, rows[0].record, queue.journal, "halted", UNCLAIMABLE + ": " + reason, "worker");
      return;
    }
    const rows = arrayOf(new DynamicModel({ state: "" }));
    tx.db().newQuery("SELECT CAST(state AS TEXT) AS state FROM audio_records WHERE id = {:id}").bind({ id: id }).all(rows);
    journal.add(tx, id, rows.length > 0 ? rows[0].state : "", "halted", UNCLAIMABLE + ": " + reason, "worker");
    live.publish(tx, id);
  });
  if (halted) app.logger().error("claim: " + what + " set aside, its fields could not be read", "table", table, "id", id, "error", String(error));
  return halted;
}

// When the next record becomes claimable (ms), or 0 if none is waiting.
// `followUps`: the follow-up queues the caller takes work of too (as `claim`), whose rows count.
function nextAvailableAt(app, now, followUps) {
  const row = new DynamicModel({ next: 0 });
  const of = (table) => "SELECT available_at FROM " + table + " WHERE available_at > {:now}";
  const tables = ["audio_records"].concat(followUpPlan(followUps).map((q) => q.table));
  app.db()
    .newQuery("SELECT COALESCE(MIN(available_at), 0) AS next FROM (" + tables.map(of).join(" UNION ALL ") + ")")
    .bind({ now: now })
    .one(row);
  return row.next;
}

module.exports = { claim: claim, nextAvailableAt: nextAvailableAt };
