/// <reference path="../pb_data/types.d.ts" />
// What normalize finds, kept so that nothing after it works it out again:
// - audio_records.duration_ms: the recording's decoded length, written once by
//   normalize (with the charge of H4) and read from here everywhere after;
// - files.speech: where the speech is in a normalized piece (voice activity
//   detection, run once at normalize), as [start, end] pairs in ms from the
//   piece's start. The offline engine decodes these regions instead of
//   searching the piece for speech again. Empty on pieces made before this
//   (the engine then searches itself).
// Recordings normalized before this get their length from their pieces.

migrate((app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  records.fields.add(new NumberField({
    name: "duration_ms",
    onlyInt: true,
    min: 0,
    help: "The recording's length as decoded (ms); 0 until it is normalized. Kept by the pipeline.",
  }));
  app.save(records);
  app.db().newQuery(
    "UPDATE audio_records SET duration_ms = COALESCE((SELECT MAX(f.offset_ms + f.duration_ms) FROM files f" +
    " WHERE f.record = audio_records.id AND f.role = 'normalized' AND f.superseded = FALSE), 0)"
  ).execute();

  const files = app.findCollectionByNameOrId("files");
  files.fields.add(new JSONField({
    name: "speech",
    maxSize: 8 * 1024 * 1024,
    help: "Where voice activity detection found speech in this piece: [start, end] pairs in ms from its start.",
  }));
  app.save(files);
}, (app) => {
  const files = app.findCollectionByNameOrId("files");
  files.fields.removeByName("speech");
  app.save(files);
  const records = app.findCollectionByNameOrId("audio_records");
  records.fields.removeByName("duration_ms");
  app.save(records);
});
