/// <reference path="../pb_data/types.d.ts" />
// Guards on the owner's admin panel (SPEC ST5, ST6).

// ST5: recordings are never deleted, by anyone: not through the records API, the panel
// included (the request), nor by a hook's own delete (the model).
for (const refuse of [onRecordDeleteRequest, onRecordDelete]) {
  refuse((e) => {
    throw new BadRequestError("Recordings are never deleted. To stop one, set 'halted_at' (halt it) instead.");
  }, "audio_records");
}

// ST6: the save runs in a transaction, so the stored row read by the merge is
// the one the write replaces (claims cannot slip in between: one writer). The
// sender's page follows the owner's changes (stage, halt, title) live.
onRecordUpdateRequest((e) => require(`${__hooks}/lib/panel.js`).inTransaction(e), "audio_records");

onRecordUpdate((e) => require(`${__hooks}/lib/panel.js`).ownerSave(e), "audio_records");

// A recording is made by an upload (intake writes its file in the same
// transaction); one made here would have no audio and wait forever.
onRecordCreateRequest((e) => {
  throw new BadRequestError("Recordings are created by uploading their audio (POST /api/transcriber/records, " +
    "or `transcriber transcribe FILE`); one created here would have nothing to transcribe.");
}, "audio_records");

// H6: a corrected transcript text carries its timed segments along (lib/corrections.js).
onRecordUpdateRequest((e) => {
  require(`${__hooks}/lib/corrections.js`).followContent(e.app, e.record);
  e.next();
}, "texts");

// The pipeline's history and artifacts are written only through its fenced
// routes (pipeline.pb.js). Through the records API, the panel included, the
// journal, the attempts and the files are read-only: an edited attempt could
// let the paid-call guard start a recognition twice, a deleted file would
// strand its recording, an edited journal would no longer tell what happened.
// A transcript's text may be corrected by the owner, but not added or removed.
onRecordCreateRequest((e) => {
  throw new BadRequestError(`Rows of '${e.collection.name}' are written by the pipeline only.`);
}, "record_events", "recognition_attempts", "files", "texts");

onRecordUpdateRequest((e) => {
  throw new BadRequestError(`Rows of '${e.collection.name}' are the pipeline's history and cannot be edited.`);
}, "record_events", "recognition_attempts", "files");

onRecordDeleteRequest((e) => {
  throw new BadRequestError(`Rows of '${e.collection.name}' are kept with their recording and cannot be deleted.`);
}, "record_events", "recognition_attempts", "files", "texts");

// The audit of erasures outlives what it records: nobody deletes or edits it.
onRecordDeleteRequest((e) => {
  throw new BadRequestError("The audit of erasures is kept for good.");
}, "erasures");
onRecordUpdateRequest((e) => {
  throw new BadRequestError("The audit of erasures is kept as written.");
}, "erasures");

// Follow-up rows (insights, literary, each queue lib/followups.js declares): the owner runs the step
// again (state → queued), resumes or halts it, or asks for it on an older
// recording (a new row); the answer itself (quotes, counts; the literary text
// in texts) is the step's. Rows are kept with their recording.
onRecordUpdateRequest((e) => {
  const panel = require(`${__hooks}/lib/panel.js`);
  panel.inTransaction(e, panel.mergeFollowUpEdit);
}, ...require(`${__hooks}/lib/followups.js`).names());

onRecordCreateRequest((e) => {
  const panel = require(`${__hooks}/lib/panel.js`);
  panel.inTransaction(e, panel.newFollowUp);
}, ...require(`${__hooks}/lib/followups.js`).names());

onRecordDeleteRequest((e) => {
  throw new BadRequestError("Rows of '" + e.collection.name + "' are kept with their recording. To stop the step, set 'halted_at'.");
}, ...require(`${__hooks}/lib/followups.js`).names());
