// ST6: what an owner's edit of a record in the admin panel may change.
//
// The panel posts the whole form as it was when the dialog opened, so the
// submitted queue fields may be older than what a worker wrote since. The
// queue fields are therefore always taken from the stored row, and the form
// counts as the owner's intent about the stage or the halt only when its
// `queue_rev` is still the stored one (neither the stage nor the halt changed
// since it opened; claims and postpones do not count).
const followups = require("./followups.js");
const insights = require("./insights.js");
const journal = require("./journal.js");
const live = require("./live.js");
const stages = require("./stages.js");
const transitions = require("./transitions.js");

const QUEUE_FIELDS = [
  "state", "state_entered_at", "halted_at", "halt_code", "halt_reason", "attempts",
  "claim_token", "claim_expires_at", "paused_until", "available_at", "queue_rev", "language", "progress",
  "progress_at", "activity", "quota_ms", "quota_at", "lease_ended_at", "duration_ms",
];

// Runs the rest of a save (`e.next()`) in one transaction, `before(tx, e.record)` first:
// the stored row a merge reads is the one the write replaces (claims cannot slip in
// between: one writer).
function inTransaction(e, before) {
  $app.runInTransaction((tx) => {
    if (before) before(tx, e.record);
    e.app = tx;
    e.next();
  });
}

// What the form asks of the queue: its `queue_rev`, its stage and its halt.
function wantedOf(rec) {
  return { rev: rec.getInt("queue_rev"), state: rec.getString("state"), halted: rec.getString("halted_at") !== "", reason: rec.getString("halt_reason") };
}

// The owner's change of the stage or the halt of `rec` (of `table`, `stored` as stored),
// applied to it as lib/transitions.js says, each journalled. Returns which it made.
function ownerChanges(app, table, rec, stored, wanted, now) {
  const stageSet = wanted.state !== stored.getString("state");
  if (stageSet) {
    transitions.setOn(rec, stored, "stage_set", now, { to: wanted.state });
    transitions.journalled(app, table, stored, "stage_set", { to: wanted.state }, "owner");
  }
  const wasHalted = stored.getString("halted_at") !== "";
  let change = null;
  // Resumed from the stage the row is in now (the one just set, if any).
  if (wasHalted && !wanted.halted) change = { name: "resumed", a: {} };
  else if (!wasHalted && wanted.halted) change = { name: "halted", a: { code: "halted_by_owner", reason: wanted.reason || "halted by the owner" } };
  if (change) {
    transitions.setOn(rec, rec, change.name, now, change.a);
    transitions.journalled(app, table, rec, change.name, change.a, "owner");
  }
  return { stageSet: stageSet, halted: change && change.name === "halted" ? change.a.reason : null };
}

// A stage set by the owner asks for the work to be redone from there. The
// recognitions already started stay readable (a re-poll or re-finalize uses
// them), but the submit step starts a new one instead of resuming them. A
// resume (clearing the halt) does not do this: it must never pay twice.
function supersedeAttempts(app, recordId) {
  const open = app.findRecordsByFilter(
    "recognition_attempts", "record = {:id} && status != 'lost' && status != 'superseded'", "", 0, 0, { id: recordId });
  for (const row of open) {
    row.set("status", "superseded");
    app.save(row);
  }
}

function supersedeNormalized(app, recordId) {
  const rows = app.findRecordsByFilter(
    "files", "record = {:id} && role = 'normalized' && superseded = false", "", 0, 0, { id: recordId });
  for (const row of rows) {
    row.set("superseded", true);
    app.save(row);
  }
}

// Whether a current normalized copy with speech in it has lost its blob (lib/attachments.js removeNormalized).
function normalizedRemoved(app, recordId) {
  const rows = app.findRecordsByFilter(
    "files", "record = {:id} && role = 'normalized' && superseded = false && removed_at > 0 && speech_ms > 0",
    "", 1, 0, { id: recordId });
  return rows.length > 0;
}

// `rec` holds the submitted values; `app` is the transaction the save runs in.
function mergeOwnerEdit(app, rec) {
  const stored = app.findRecordById("audio_records", rec.id);
  const wanted = wantedOf(rec);
  for (const f of QUEUE_FIELDS) rec.set(f, stored.get(f));
  const briefEdited = rec.getString("brief") !== stored.getString("brief") ||
    JSON.stringify(rec.getStringSlice("topics")) !== JSON.stringify(stored.getStringSlice("topics"));

  const wasHalted = stored.getString("halted_at") !== "";
  const stage = stored.getString("state");
  if (rec.getString("owner") !== stored.getString("owner")) {
    // Who may read a recording is its owner: a change of hands is history worth keeping.
    journal.add(app, rec.id, stage, "note",
      "owner changed by the owner of the service from " + stored.getString("owner") + " to " + rec.getString("owner"), "owner");
  }
  if (wanted.rev !== stored.getInt("queue_rev")) {
    if (wanted.state !== stage || wanted.halted !== wasHalted || briefEdited) {
      // O8: the form was opened before the pipeline last moved the record; saving its
      // stage or halt would undo the pipeline's work. Refused, with the way out.
      throw new BadRequestError(
        "This recording changed since you opened it (it is now in stage '" + stage + "'" +
        (wasHalted ? ", halted" : "") + "). Nothing was saved: close this form, open the recording again and redo your change.");
    }
    return;
  }

  if (wanted.state !== stage && wanted.state === stages.NORMALIZED && normalizedRemoved(app, rec.id)) {
    // Recognizing again reads the normalized copy, removed some time after the recording was done.
    throw new BadRequestError(
      "The normalized audio of this recording was removed after it was done (its journal says when), so it cannot " +
      "be recognized again from stage '" + stages.NORMALIZED + "'. Nothing was saved: set the stage to '" + stages.UPLOADED +
      "' instead; " +
      "it is normalized again from the original.");
  }

  const now = Date.now();
  // The owner's brief and topics are theirs: the insights step never writes over them.
  if (briefEdited) insights.ownerEdited(app, rec.id, now);
  const changed = ownerChanges(app, "audio_records", rec, stored, wanted, now);
  if (changed.stageSet) {
    supersedeAttempts(app, rec.id);
    // O9: back to uploaded means normalize again; the earlier normalized copies stay as history.
    if (wanted.state === stages.UPLOADED) supersedeNormalized(app, rec.id);
  }
  // P16: every halt is also a log line (PocketBase's log, beside the sidecar's own halts).
  if (changed.halted !== null) app.logger().warn("record halted by the owner", "record", rec.id, "reason", changed.halted);
}

// The owner's save of a recording, in the transaction `inTransaction` opened: merged,
// saved, and followed live by the sender's page (stage, halt, title).
function ownerSave(e) {
  mergeOwnerEdit(e.app, e.record);
  e.next();
  live.publish(e.app, e.record);
}

// The fields of a follow-up row (lib/followups.js) the form never changes: its queue fields and,
// for each queue, the step's answer (read-only here too).
const FOLLOW_UP_KEPT = [
  "record", "state", "state_entered_at", "halted_at", "halt_code", "halt_reason", "attempts", "claim_token",
  "claim_expires_at", "paused_until", "available_at", "queue_rev", "progress", "progress_at", "activity", "language",
];
const ANSWER_KEPT = { insights: ["quotes", "quotes_for", "proposed", "kept", "provider", "model", "no_brief", "no_brief_reason"] };

// An owner's save of a follow-up row (an insights or a literary row): setting `state` to
// queued runs the step again, clearing `halted_at` resumes it, setting it halts it; nothing
// else is taken from the form. As for recordings, a form opened before the pipeline moved
// the row is refused.
function mergeFollowUpEdit(app, row) {
  const table = row.collection().name;
  const stored = app.findRecordById(table, row.id);
  const wanted = wantedOf(row);
  for (const f of FOLLOW_UP_KEPT.concat(ANSWER_KEPT[table] || [])) row.set(f, stored.get(f));
  const wasHalted = stored.getString("halted_at") !== "";
  const changes = wanted.state !== stored.getString("state") || wanted.halted !== wasHalted;
  if (!changes) return;
  if (wanted.rev !== stored.getInt("queue_rev")) {
    throw new BadRequestError("This " + followups.of(table).what + " changed since you opened it (it is now '" +
      stored.getString("state") + "'" + (wasHalted ? ", halted" : "") +
      "). Nothing was saved: close this form, open it again and redo your change.");
  }
  ownerChanges(app, table, row, stored, wanted, Date.now());
}
const mergeInsightsEdit = mergeFollowUpEdit;

// The owner asks for a follow-up of a recording that has none (done before it was turned on):
// a new row, queued now.
function newFollowUp(app, row) {
  const table = row.collection().name;
  const rec = app.findRecordById("audio_records", row.getString("record"));
  if (rec.getString("state") !== stages.DONE) {
    throw new BadRequestError("The " + table + " step reads a finished transcript: this recording is not done yet.");
  }
  const now = Date.now();
  const fields = {
    state: stages.QUEUED, state_entered_at: now, halted_at: "", halt_code: "", halt_reason: "", attempts: 0, claim_token: "",
    claim_expires_at: 0, paused_until: 0, available_at: now, queue_rev: 0, progress: 0, progress_at: 0, activity: "",
    language: "",
  };
  if (table === "insights") Object.assign(fields, { quotes: null, quotes_for: "", proposed: 0, kept: 0, provider: "", model: "" });
  for (const f in fields) row.set(f, fields[f]);
  journal.add(app, rec.id, followups.of(table).journal, "stage_set", table + " asked for by the owner", "owner");
}
const newInsights = newFollowUp;

module.exports = {
  inTransaction: inTransaction, ownerSave: ownerSave, mergeInsightsEdit: mergeInsightsEdit, newInsights: newInsights,
  mergeFollowUpEdit: mergeFollowUpEdit, newFollowUp: newFollowUp,
};
