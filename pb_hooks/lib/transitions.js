// The queue transitions (SPEC P4–P11, ST6), each declared once with everything about
// it. Each name is that change's one name everywhere: the settle route's `outcome`, the
// journal's `kind`, the sidecar's `Outcome` and `Keep` (sidecar/outcome.py) and its
// metrics label. An entry says:
//   args(app, body, now, table)  what a claim's holder sends with it to the settle route
//                                (lib/args.js); only the outcomes a worker settles have it
//   fields(rec, now, a)          what it writes, from the stored row `rec`, `now` (unix ms)
//                                and its arguments `a`
//   journal(a, table, rec, actor)  its journal row: [the stage, or null for the row's own
//                                (lib/journal.js `at`), the text]; none for the two that
//                                keep the claim
//   after(tx, table, rec, a, now)  what else it does, in the same transaction
//   quiet                        the sender sees nothing new: no live status is written
// The settle route (lib/settle.js), the owner's panel (lib/panel.js) and the sender's
// resume apply them, to every queue: a recording's stages (`audio_records`) and the
// follow-up queues (lib/followups.js), whose wording comes from their declaration.
//
// `available_at` is the claim's single sort key: when the row becomes claimable; 0 =
// never (terminal or halted). A row claimable right away (uploaded, advanced, released,
// resumed) gets its creation time, so those are taken in creation order (P4, P13: the
// oldest recording is finished first); a paused, leased or retried one gets the moment
// it may be taken again, which keeps it out of the claim's index range until then.
const args = require("./args.js");
const datetimes = require("./datetimes.js");
const followups = require("./followups.js");
const journal = require("./journal.js");
const records = require("./records.js");
const stages = require("./stages.js");

// The row's creation time in unix ms: the claim key of a row that is claimable right
// away. The one place it is computed.
function createdMs(rec) {
  return rec.getDateTime("created").time().unixMilli();
}

// Puts a just-saved new row of `table` in the queue at its creation time (inside the caller's transaction).
function enqueue(tx, rec, table) {
  tx.db().newQuery("UPDATE " + (followups.of(table) ? table : "audio_records") + " SET available_at = {:at} WHERE id = {:id}")
    .bind({ id: rec.id, at: createdMs(rec) }).execute();
}

// A claim ends: what its holder reported doing (`activity`) ends with it.
function freed(fields) {
  return Object.assign({ claim_token: "", claim_expires_at: 0, activity: "" }, fields);
}

const TRANSITIONS = {
  // A step finished: the next stage, its clock restarted, attempts afresh.
  advanced: {
    args: (app, body, now, table) => {
      const to = args.text(body, "to", 50);
      if (stages.allowed(app, table).indexOf(to) < 0) throw new args.Invalid("unknown stage '" + to + "'");
      // The follow-up queues a recording entering its terminal stage is queued on.
      const asked = followups.asked(body);
      if (asked.unknown.length > 0) throw new args.Invalid("unknown follow-up queue '" + asked.unknown[0] + "'");
      return { to: to, text: args.optText(body, "text"), follow_ups: asked.names };
    },
    fields: (rec, now, a) => freed({
      state: a.to, state_entered_at: now, attempts: 0, paused_until: 0,
      queue_rev: rec.getInt("queue_rev") + 1, available_at: stages.isTerminal(a.to) ? 0 : createdMs(rec),
      progress: stages.isTerminal(a.to) ? 1 : rec.getFloat("progress"),
    }),
    journal: (a, table) => followups.of(table) ? [null, a.text || followups.of(table).done] : [a.to, a.text || "entered " + a.to],
    // A recording entering its terminal stage is queued on the follow-ups the caller has on.
    after: (tx, table, rec, a, now) => {
      if (table !== "audio_records" || !stages.isTerminal(a.to)) return;
      for (const q of a.follow_ups || []) {
        queueFollowUp(tx, q, rec.id, now);
        journal.add(tx, rec.id, a.to, "note", followups.of(q).queued, "worker");
      }
    },
  },
  // P10: not a transition of the stage; its clock keeps running.
  postponed: {
    args: (app, body, now) => ({ until: args.later(body, "until", now), text: args.optText(body, "text") }),
    fields: (rec, now, a) => freed({ paused_until: a.until, attempts: 0, available_at: a.until }),
    journal: (a) => [null, a.text || "postponed"],
  },
  // P11: a flag, never a stage.
  halted: {
    args: (app, body, now, table) => {
      const code = args.text(body, "code", 50);
      const codes = app.findCachedCollectionByNameOrId(table).fields.getByName("halt_code").values;
      if (codes.indexOf(code) < 0) throw new args.Invalid("unknown halt code '" + code + "'");
      return { code: code, reason: args.text(body, "reason", 2000) };
    },
    fields: (rec, now, a) => freed({
      halted_at: datetimes.dbTime(now), halt_code: a.code, halt_reason: String(a.reason).slice(0, 2000),
      queue_rev: rec.getInt("queue_rev") + 1, available_at: 0,
    }),
    journal: (a) => [null, a.code + ": " + a.reason],
  },
  // A failed try: the attempt stays spent; claimable again from `retry_at`.
  failed: {
    args: (app, body) => ({ retry_at: args.number(body, "retry_at"), text: args.optText(body, "text") || "step failed" }),
    fields: (rec, now, a) => freed({ available_at: Math.max(a.retry_at, now) }),
    journal: (a) => [null, a.text],
  },
  // P8: our own shutdown is no verdict; the claim's attempt is given back.
  released: {
    args: () => ({}),
    fields: (rec) => freed({ attempts: Math.max(rec.getInt("attempts") - 1, 0), available_at: createdMs(rec) }),
    journal: () => [null, "released on shutdown; attempt not counted"],
  },
  // The claim goes on: a long step still runs. A longer lease shows the sender nothing new.
  extended: {
    args: (app, body, now) => ({ until: args.later(body, "until", now) }),
    fields: (rec, now, a) => ({ claim_expires_at: a.until, available_at: a.until }),
    quiet: true,
  },
  // The claim goes on. LA4: how far recognition has come; it never goes back. Moving
  // progress also tells the stall watchdog the step is alive (progress_at). With it,
  // optionally, what the step is doing now (`activity`: one of the schema's activities
  // that describe work; anything else is refused) and the language it found (kept only
  // when it is a code of the schema's list, as the texts route does). An insights row
  // keeps its progress alone.
  progressed: {
    args: (app, body, now, table) => {
      const value = args.fraction(body, "progress");
      if (followups.of(table)) return { progress: value, activity: null, language: null };
      const activity = args.optText(body, "activity", 50);
      const reported = records.activities(app).filter((v) => records.DERIVED_ONLY.indexOf(v) < 0);
      if (activity !== null && reported.indexOf(activity) < 0) throw new args.Invalid("'activity' must be one of " + reported.join(", "));
      const language = args.optText(body, "language", 10);
      return { progress: value, activity: activity, language: language !== null && records.languages(app).indexOf(language) >= 0 ? language : null };
    },
    fields: (rec, now, a) => Object.assign(
      a.progress > rec.getFloat("progress") ? { progress: a.progress, progress_at: now } : { progress: rec.getFloat("progress") },
      a.activity ? { activity: a.activity } : {},
      a.language ? { language: a.language } : {},
    ),
  },
  // The owner clears the halt (or the sender, one another try can cure: lib/settle.js
  // `resumeBySender`): the stage resumes with a fresh count and clock (ST6).
  resumed: {
    fields: (rec, now) => freed({
      halted_at: "", halt_code: "", halt_reason: "", state_entered_at: now, paused_until: 0, attempts: 0,
      queue_rev: rec.getInt("queue_rev") + 1, available_at: stages.isTerminal(rec.getString("state")) ? 0 : createdMs(rec),
    }),
    journal: (a, table, rec, actor) => [null, (followups.of(table) ? table + " halt cleared" : "halt cleared") + " by the " + actor +
      (actor === "sender" ? " (" + rec.getString("halt_code") + ")" : "")],
  },
  // The owner sets the stage: it restarts from there (unless the row is halted).
  stage_set: {
    fields: (rec, now, a) => freed({
      state: a.to, state_entered_at: now, paused_until: 0, attempts: 0, queue_rev: rec.getInt("queue_rev") + 1,
      available_at: rec.getString("halted_at") !== "" || stages.isTerminal(a.to) ? 0 : createdMs(rec),
      progress: stages.isTerminal(a.to) ? 1 : 0,  // the work starts over
    }),
    journal: (a, table, rec, actor) => followups.of(table)
      ? [null, table + " set to " + a.to + " by the " + actor + (a.to === stages.QUEUED ? ": " + followups.of(table).again : "") +
        (a.why ? " (" + a.why + ")" : "")]
      : [a.to, "stage changed by the " + actor + " from " + rec.getString("state") + " to " + a.to],
  },
};

// The names the settle route takes (those a claim's holder sends), in the order the docs list them.
const OUTCOMES = Object.keys(TRANSITIONS).filter((name) => TRANSITIONS[name].args);

// The fields of transition `name` applied to the stored row `rec`.
function fieldsOf(rec, name, now, a) {
  return TRANSITIONS[name].fields(rec, now, a || {});
}

// Sets the fields of transition `name`, from the stored row `from`, on `to`, a row about to be saved.
function setOn(to, from, name, now, a) {
  const fields = fieldsOf(from, name, now, a);
  for (const f in fields) to.set(f, fields[f]);
}

// The journal row of transition `name` of the row `rec` of `table`, by `actor` (inside
// the caller's transaction `app`); none for a transition that keeps the claim.
function journalled(app, table, rec, name, a, actor) {
  const said = TRANSITIONS[name].journal;
  if (!said) return;
  const line = said(a || {}, table, rec, actor);
  const where = journal.at(table, rec);
  journal.add(app, where[0], line[0] || where[1], name, line[1], actor);
}

// A recording just done gets its row of follow-up queue `table` queued (or queued again:
// the owner had it recognized anew, or corrected its transcript), inside the caller's
// transaction, through the `stage_set` transition (and `resumed`'s clearing of a halt).
// `actor` (optional): who asked, journalled with `why`; a worker's queueing is journalled
// by the caller. Returns the row.
function queueFollowUp(tx, table, recordId, now, actor, why) {
  const found = tx.findRecordsByFilter(table, "record = {:id}", "", 1, 0, { id: recordId });
  if (found.length > 0) {
    const row = found[0];
    const a = { to: stages.QUEUED, why: why };
    if (row.getString("halted_at") !== "") setOn(row, row, "resumed", now);
    setOn(row, row, "stage_set", now, a);
    row.set("halted_at", "");
    row.set("halt_code", "");
    row.set("halt_reason", "");
    row.set("available_at", createdMs(row));
    tx.save(row);
    if (actor) journalled(tx, table, row, "stage_set", a, actor);
    return row;
  }
  const row = new Record(tx.findCollectionByNameOrId(table));
  row.set("record", recordId);
  row.set("state", stages.QUEUED);
  row.set("state_entered_at", now);
  tx.save(row);
  enqueue(tx, row, table);
  return row;
}

module.exports = {
  TRANSITIONS: TRANSITIONS, OUTCOMES: OUTCOMES, fieldsOf: fieldsOf, setOn: setOn, journalled: journalled, enqueue: enqueue,
  queueFollowUp: queueFollowUp,
};
