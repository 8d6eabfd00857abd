// ST6: what an owner's edit of a record in the admin panel may change.
//
// The panel posts the whole form as it was when the dialog opened, so the
// submitted queue fields may be older than what a worker wrote since. The
// queue fields are therefore always taken from the stored row, and the form
// counts as the owner's intent about the stage or the halt only when its
// `queue_rev` is still the stored one (neither the stage nor the halt changed
// since it opened; claims and postpones do not count).
const queue = require(`${__hooks}/lib/queue.js`);
const records = require(`${__hooks}/lib/records.js`);
const insights = require(`${__hooks}/lib/insights.js`);
const stages = require(`${__hooks}/lib/stages.js`);

const QUEUE_FIELDS = [
  "state", "state_entered_at", "halted_at", "halt_code", "halt_reason", "attempts",
  "claim_token", "claim_expires_at", "paused_until", "available_at", "queue_rev", "language", "progress",
  "progress_at", "activity", "quota_ms", "quota_at", "lease_ended_at", "duration_ms",
];

// Applies a queue transition of lib/queue.js to the record being saved.
function apply(rec, fields) {
  for (const f in fields) rec.set(f, fields[f]);
}

// A stage set by the owner asks for the work to be redone from there. The
// recognitions already started stay readable (a re-poll or re-finalize uses
// them), but the submit step starts a new one instead of resuming them. A
// resume (clearing the halt) does not do this: it must never pay twice.
function supersedeAttempts(app, recordId) {
  const open = app.findRecordsByFilter(
    "recognition_attempts", "record = {:id} && status != 'failed' && status != 'superseded'", "", 0, 0, { id: recordId });
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

// Whether a current normalized copy with speech in it has lost its blob (pipeline.pb.js, normalized/remove).
function normalizedRemoved(app, recordId) {
  const rows = app.findRecordsByFilter(
    "files", "record = {:id} && role = 'normalized' && superseded = false && removed_at > 0 && speech_ms > 0",
    "", 1, 0, { id: recordId });
  return rows.length > 0;
}

// `rec` holds the submitted values; `app` is the transaction the save runs in.
function mergeOwnerEdit(app, rec) {
  const stored = app.findRecordById("audio_records", rec.id);
  const wanted = {
    rev: rec.getInt("queue_rev"),
    state: rec.getString("state"),
    halted: rec.getString("halted_at") !== "",
    reason: rec.getString("halt_reason"),
  };
  for (const f of QUEUE_FIELDS) rec.set(f, stored.get(f));
  const briefEdited = rec.getString("brief") !== stored.getString("brief") ||
    JSON.stringify(rec.getStringSlice("topics")) !== JSON.stringify(stored.getStringSlice("topics"));

  const wasHalted = stored.getString("halted_at") !== "";
  const stage = stored.getString("state");
  if (rec.getString("owner") !== stored.getString("owner")) {
    // Who may read a recording is its owner: a change of hands is history worth keeping.
    records.journal(app, rec.id, stage, "note",
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
  if (wanted.state !== stage) {
    apply(rec, queue.fieldsOf(stored, "stage_set", now, { to: wanted.state }));
    records.journal(app, rec.id, wanted.state, "stage_set", "stage changed by the owner from " + stage + " to " + wanted.state, "owner");
    supersedeAttempts(app, rec.id);
    // O9: back to uploaded means normalize again; the earlier normalized copies stay as history.
    if (wanted.state === stages.UPLOADED) supersedeNormalized(app, rec.id);
  }
  if (wasHalted && !wanted.halted) {
    // Resumed from the stage the record is in now (the one just set, if any).
    apply(rec, queue.fieldsOf(rec, "resumed", now));
    records.journal(app, rec.id, rec.getString("state"), "resumed", "halt cleared by the owner", "owner");
  } else if (!wasHalted && wanted.halted) {
    const reason = wanted.reason || "halted by the owner";
    apply(rec, queue.fieldsOf(rec, "halted", now, { code: "halted_by_owner", reason: reason }));
    records.journal(app, rec.id, rec.getString("state"), "halted", "halted_by_owner: " + reason, "owner");
    // P16: every halt is also a log line (PocketBase's log, beside the sidecar's own halts).
    app.logger().warn("record halted by the owner", "record", rec.id, "reason", reason);
  }
}

// The queue fields of an insights row (the rest is the step's answer: read-only here too).
const INSIGHTS_KEPT = [
  "record", "state", "state_entered_at", "halted_at", "halt_code", "halt_reason", "attempts", "claim_token",
  "claim_expires_at", "paused_until", "available_at", "queue_rev", "progress", "progress_at", "activity", "language",
  "quotes", "quotes_for", "proposed", "kept", "provider", "model",
];

// An owner's save of an insights row: setting `state` to queued runs the step
// again, clearing `halted_at` resumes it, setting it halts it; nothing else is
// taken from the form. As for recordings, a form opened before the pipeline
// moved the row is refused.
function mergeInsightsEdit(app, row) {
  const stored = app.findRecordById("insights", row.id);
  const wanted = { rev: row.getInt("queue_rev"), state: row.getString("state"), halted: row.getString("halted_at") !== "", reason: row.getString("halt_reason") };
  for (const f of INSIGHTS_KEPT) row.set(f, stored.get(f));
  const recordId = stored.getString("record");
  const wasHalted = stored.getString("halted_at") !== "";
  const changes = wanted.state !== stored.getString("state") || wanted.halted !== wasHalted;
  if (!changes) return;
  if (wanted.rev !== stored.getInt("queue_rev")) {
    throw new BadRequestError("This insights row changed since you opened it (it is now '" + stored.getString("state") + "'" +
      (wasHalted ? ", halted" : "") + "). Nothing was saved: close this form, open it again and redo your change.");
  }
  const now = Date.now();
  if (wanted.state !== stored.getString("state")) {
    const fields = queue.fieldsOf(stored, "stage_set", now, { to: wanted.state });
    for (const f in fields) row.set(f, fields[f]);
    records.journal(app, recordId, stages.INSIGHTS_JOURNAL_STAGE, "stage_set", "insights set to " + wanted.state + " by the owner" +
      (wanted.state === stages.QUEUED ? ": the brief and topics will be made again" : ""), "owner");
  }
  if (wasHalted && !wanted.halted) {
    const fields = queue.fieldsOf(row, "resumed", now);
    for (const f in fields) row.set(f, fields[f]);
    records.journal(app, recordId, stages.INSIGHTS_JOURNAL_STAGE, "resumed", "insights halt cleared by the owner", "owner");
  } else if (!wasHalted && wanted.halted) {
    const reason = wanted.reason || "halted by the owner";
    const fields = queue.fieldsOf(row, "halted", now, { code: "halted_by_owner", reason: reason });
    for (const f in fields) row.set(f, fields[f]);
    records.journal(app, recordId, stages.INSIGHTS_JOURNAL_STAGE, "halted", "halted_by_owner: " + reason, "owner");
  }
}

// The owner asks for insights of a recording that has none (done before they were turned on):
// a new row, queued now.
function newInsights(app, row) {
  const rec = app.findRecordById("audio_records", row.getString("record"));
  if (rec.getString("state") !== stages.DONE) {
    throw new BadRequestError("Insights are made from a finished transcript: this recording is not done yet.");
  }
  const now = Date.now();
  const fields = {
    state: stages.QUEUED, state_entered_at: now, halted_at: "", halt_code: "", halt_reason: "", attempts: 0, claim_token: "",
    claim_expires_at: 0, paused_until: 0, available_at: now, queue_rev: 0, progress: 0, progress_at: 0, activity: "",
    language: "", quotes: null, quotes_for: "", proposed: 0, kept: 0, provider: "", model: "",
  };
  for (const f in fields) row.set(f, fields[f]);
  records.journal(app, rec.id, stages.INSIGHTS_JOURNAL_STAGE, "stage_set", "insights asked for by the owner", "owner");
}

module.exports = {
  mergeOwnerEdit: mergeOwnerEdit, QUEUE_FIELDS: QUEUE_FIELDS, mergeInsightsEdit: mergeInsightsEdit, newInsights: newInsights,
};
