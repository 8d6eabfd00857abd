/// <reference path="../pb_data/types.d.ts" />
// Long recordings (SPEC LA1–LA4): a recording is recognized in pieces.
// - files: a normalized piece's place in the recording (piece, of pieces, offset)
//   and how much speech it holds (a piece without speech is never sent);
// - recognition_attempts: which piece an attempt recognizes, and where it lies;
// - audio_records: progress, 0..1, shown in the poll, and when it last moved
//   (a step that keeps making progress is not stalled, however long it runs).
// Normalized files made before pieces existed are each one whole piece.

migrate((app) => {
  const files = app.findCollectionByNameOrId("files");
  files.fields.add(new NumberField({ name: "piece", onlyInt: true, min: 0, help: "Which piece of the recording this is (from 0)." }));
  files.fields.add(new NumberField({ name: "pieces", onlyInt: true, min: 0, help: "How many pieces the recording was cut into." }));
  files.fields.add(new NumberField({ name: "offset_ms", onlyInt: true, min: 0, help: "Where this piece starts in the recording (ms)." }));
  files.fields.add(new NumberField({ name: "speech_ms", onlyInt: true, min: 0, help: "How much speech voice activity detection found in it (ms); 0: never sent to be recognized." }));
  app.save(files);
  app.db().newQuery("UPDATE files SET pieces = 1, speech_ms = duration_ms WHERE role = 'normalized'").execute();

  const attempts = app.findCollectionByNameOrId("recognition_attempts");
  attempts.fields.add(new NumberField({ name: "piece", onlyInt: true, min: 0, help: "The piece of the recording this attempt recognizes." }));
  attempts.fields.add(new NumberField({ name: "offset_ms", onlyInt: true, min: 0, help: "Where that piece starts in the recording (ms)." }));
  app.save(attempts);

  const records = app.findCollectionByNameOrId("audio_records");
  records.fields.add(new NumberField({ name: "progress", min: 0, max: 1, help: "How far recognition has come, 0 to 1 (shown to the sender). Kept by the pipeline." }));
  records.fields.add(new NumberField({ name: "progress_at", onlyInt: true, min: 0, help: "When progress last moved (ms since the epoch); the stall watchdog counts from the later of this and entering the stage." }));
  app.save(records);
  app.db().newQuery("UPDATE audio_records SET progress = 1 WHERE state = 'done'").execute();
}, (app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  for (const name of ["progress_at", "progress"]) records.fields.removeByName(name);
  app.save(records);
  const attempts = app.findCollectionByNameOrId("recognition_attempts");
  for (const name of ["offset_ms", "piece"]) attempts.fields.removeByName(name);
  app.save(attempts);
  const files = app.findCollectionByNameOrId("files");
  for (const name of ["speech_ms", "offset_ms", "pieces", "piece"]) files.fields.removeByName(name);
  app.save(files);
});
