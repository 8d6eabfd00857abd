/// <reference path="../pb_data/types.d.ts" />
// H4, second pass: the audio quota holds under a burst. Only normalized audio
// counted, so ten parallel uploads all fitted before any was measured. Now:
// - audio_records.quota_ms: the audio charged to the sender's day. Intake
//   reserves it from what the container declares (or a conservative guess),
//   inside the transaction that creates the record; normalize replaces it
//   with the decoded length, inside a fenced transaction. Kept by the
//   pipeline (the panel's save takes it from the stored row).
// - halt code over_quota: the decoded length breaks the sender's quota;
//   halted before any recognition, charged nothing.
// Recordings normalized before this are charged what normalize measured.
migrate((app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  records.fields.add(new NumberField({
    name: "quota_ms",
    onlyInt: true,
    min: 0,
    help: "Audio charged to the sender's daily quota (ms): reserved at upload from the recording's declared length, replaced by the decoded length at normalize. Kept by the pipeline.",
  }));
  const code = records.fields.getByName("halt_code");
  if (code.values.indexOf("over_quota") < 0) code.values = code.values.concat(["over_quota"]);
  app.save(records);
  app.db().newQuery(
    "UPDATE audio_records SET quota_ms = COALESCE((SELECT MAX(f.offset_ms + f.duration_ms) FROM files f " +
    "WHERE f.record = audio_records.id AND f.role = 'normalized'), 0)").execute();
}, (app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  records.fields.removeByName("quota_ms");
  const code = records.fields.getByName("halt_code");
  code.values = code.values.filter((v) => v !== "over_quota");
  app.save(records);
});
