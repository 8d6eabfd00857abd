/// <reference path="../pb_data/types.d.ts" />
// Guards on the owner's admin panel (SPEC ST5, ST6).

// ST5: recordings are never deleted, by anyone, the panel included.
onRecordDeleteRequest((e) => {
  throw new BadRequestError("Recordings are never deleted. To stop one, set 'halted_at' (halt it) instead.");
}, "audio_records");

onRecordDelete((e) => {
  throw new BadRequestError("Recordings are never deleted. To stop one, set 'halted_at' (halt it) instead.");
}, "audio_records");

// ST6: the save runs in a transaction, so the stored row read by the merge is
// the one the write replaces (claims cannot slip in between: one writer).
onRecordUpdateRequest((e) => {
  $app.runInTransaction((tx) => {
    e.app = tx;
    e.next();
  });
}, "audio_records");

onRecordUpdate((e) => {
  require(`${__hooks}/lib/panel.js`).mergeOwnerEdit(e.app, e.record);
  e.next();
}, "audio_records");
