// The fence, and the writes made under it (SPEC P5–P11).
//
// Every write a worker makes is conditional on its claim token and is checked and
// applied inside one transaction on PocketBase's single write connection, so a worker
// whose claim went to someone else (lease expired, the owner cleared a halt) writes
// nothing. A rule-guarded PATCH does not give this: the rule is checked outside the
// write (see docs/architecture.md).
//
// Time comes from the caller (`now`, unix ms) so that the sidecar's injected clock
// drives leases, pauses and watchdogs alike.
const args = require("./args.js");
const datetimes = require("./datetimes.js");
const followups = require("./followups.js");
const live = require("./live.js");
const readable = require("./readable.js");
const transitions = require("./transitions.js");

// The claim is no longer the caller's: answered 409 `fenced_out` (lib/routes.js).
class Fenced extends Error {}

// Checks the fence inside one transaction, then `work(tx, rec)` (attachments,
// transitions), whose answer it returns. Throws Fenced when `token` is no longer the
// claim token of the row `id` of `table`.
function underFence(app, table, id, token, work) {
  let out = null;
  app.runInTransaction((tx) => {
    let rec;
    try {
      rec = tx.findRecordById(table, id);
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
  const params = Object.assign({ id: id, upd: datetimes.dbTime(now) }, guardParams);
  const sets = [];
  for (const f in fields) {
    params["v_" + f] = fields[f];
    sets.push(f + " = {:v_" + f + "}");
  }
  return { sql: sets.join(", ") + ", updated = {:upd}", params: params };
}

// What a settle request asks for, checked before the fence (a bad request is refused
// whoever holds the claim): {now, outcome, a}, `a` read by the outcome's `args`.
function request(app, table, body) {
  const now = args.count(body, "now");
  const outcome = args.text(body, "outcome", 50);
  if (transitions.OUTCOMES.indexOf(outcome) < 0) throw new args.Invalid("'outcome' must be one of " + transitions.OUTCOMES.join(", "));
  return { now: now, outcome: outcome, a: transitions.TRANSITIONS[outcome].args(app, body, now, table) };
}

// The one fenced write of a claim's holder: the outcome `s` (from `request`) applied to
// its row `rec` of `table`, inside `underFence`'s transaction, with its journal row and
// what else the outcome does. Returns the row as written, in the claim's shape: the
// UPDATE returns it, so neither this nor the caller reads it again.
function settle(tx, table, rec, s) {
  const spec = transitions.TRANSITIONS[s.outcome];
  const set = setClause(rec.id, transitions.fieldsOf(rec, s.outcome, s.now, s.a), s.now, { token: rec.getString("claim_token") });
  const rows = arrayOf(new DynamicModel({ row: "" }));
  tx.db().newQuery("UPDATE " + table + " SET " + set.sql + " WHERE id = {:id} AND claim_token = {:token}" +
    " RETURNING " + readable.CLAIMED_JSON[table] + " AS row").bind(set.params).all(rows);
  // The fence was checked in this transaction on the single write connection: the row is there.
  if (rows.length === 0) throw new Fenced("claim token no longer matches");
  transitions.journalled(tx, table, rec, s.outcome, s.a, "worker");
  if (spec.after) spec.after(tx, table, rec, s.a, s.now);
  // A follow-up row shows on its recording's live status only where its queue says so.
  const queue = followups.of(table);
  if (!spec.quiet && !queue) live.publish(tx, rec.id, rec.getString("owner"));
  if (!spec.quiet && queue && queue.live && spec.journal && s.outcome !== "progressed") live.publish(tx, rec.getString("record"));
  return JSON.parse(rows[0].row);
}

// The sender clears a halt of their own recording (POST /api/transcriber/records/{id}/resume):
// the owner's resume (ST6) and nothing else, in one transaction — claim released, attempts
// afresh, the recognitions already started kept (a lost one was marked `lost` when the
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
    // Only while neither the stage nor the halt changed since `rec` was read.
    const set = setClause(id, transitions.fieldsOf(rec, "resumed", now), now, { rev: rec.getInt("queue_rev") });
    tx.db().newQuery("UPDATE audio_records SET " + set.sql + " WHERE id = {:id} AND queue_rev = {:rev} AND halted_at != ''")
      .bind(set.params).execute();
    transitions.journalled(tx, "audio_records", rec, "resumed", {}, "sender");
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
  Fenced: Fenced, underFence: underFence, request: request, settle: settle, resumeBySender: resumeBySender,
  writtenBefore: writtenBefore,
};
