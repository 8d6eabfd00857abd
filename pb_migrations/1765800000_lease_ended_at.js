/// <reference path="../pb_data/types.d.ts" />
// When the previous claim's lease ran out, written by the claim itself (the
// old `claim_expires_at`). The stall watchdog counts a stage's time only while
// someone was working on the record: time after a dead worker's lease ran out
// (the service down for an upgrade, a crash at night) is waiting, not a stall.
migrate((app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  records.fields.add(new NumberField({
    name: "lease_ended_at",
    onlyInt: true,
    min: 0,
    help: "When the previous claim's lease ran out (unix ms; 0: it was handed back). Kept by the server.",
  }));
  app.save(records);
}, (app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  records.fields.removeByName("lease_ended_at");
  app.save(records);
});
