/// <reference path="../pb_data/types.d.ts" />
// `record_status` is for realtime only (pb_migrations/1765929600_record_status.js,
// lib/live.js): its rules let PocketBase deliver a sender's own status events,
// and through the records API nobody but the owner of the service reads it, so
// a sender's surface stays the documented routes (ST3). The answers are the
// ones PocketBase gives for a collection without rules.
onRecordsListRequest((e) => {
  if (!e.hasSuperuserAuth()) throw new ForbiddenError("Only superusers can perform this action.");
  e.next();
}, "record_status");

onRecordViewRequest((e) => {
  if (!e.hasSuperuserAuth()) throw new ForbiddenError("Only superusers can perform this action.");
  e.next();
}, "record_status");
