/// <reference path="../pb_data/types.d.ts" />
// The sender's page plays every recording it accepts, and a recording halted
// over_quota can be resumed by its sender once the quota allows it.
// - files.role `playable`: a copy a browser plays (Ogg/Opus), made by normalize
//   from the audio it decodes anyway, for an original a browser cannot play
//   (AMR, AIFF, AU, Ogg/Speex, …). Never removed by the sweep of normalized
//   copies; exported and erased with the sender's data like every file.
// - files.codec: what intake found inside the container (e.g. `speex` in Ogg,
//   `samr` in MP4, `pcm_s16le` in WAV); "" where it did not look or could not tell.
// - files.browser_plays: intake's verdict on an original, from its container and
//   codec: `yes` a browser plays it as uploaded, `no` normalize makes a playable
//   copy. Empty on originals stored before this: those whose container alone
//   decides are filled in below; for the rest it stays unknown (the page plays
//   the original as before; setting the stage to `uploaded` makes a copy).
// - audio_records.quota_at: when the recording's audio was charged to its
//   sender's day (ms): at upload, or at the sender's resume of an over_quota
//   halt. The daily quota counts the recordings charged in the last 24 hours
//   by this time, so a recording resumed today is counted today, not on the
//   day it was uploaded. Recordings before this: their upload time.
migrate((app) => {
  const files = app.findCollectionByNameOrId("files");
  const role = files.fields.getByName("role");
  if (role.values.indexOf("playable") < 0) role.values = role.values.concat(["playable"]);
  files.fields.add(new TextField({
    name: "codec",
    max: 50,
    help: "The audio codec intake found inside the original's container (e.g. speex, samr, pcm_s16le); empty: not looked for.",
  }));
  files.fields.add(new SelectField({
    name: "browser_plays",
    maxSelect: 1,
    values: ["yes", "no"],
    help: "An original: whether a browser plays it as uploaded (intake's verdict from its container and codec). " +
      "No: normalize makes a copy of role playable. Empty: stored before this was known.",
  }));
  app.save(files);
  // Originals whose container alone decides (probed in Chromium: none of these plays in it, but FLAC and ADTS AAC).
  app.db().newQuery(
    "UPDATE files SET browser_plays = 'no' WHERE role = 'original' AND browser_plays = '' AND format IN " +
    "('aiff', 'amr', 'caf', 'au', 'wavpack', 'ape', 'flv', 'asf', 'mpeg-ps', 'mpeg-ts')").execute();
  app.db().newQuery(
    "UPDATE files SET browser_plays = 'yes' WHERE role = 'original' AND browser_plays = '' AND format IN ('flac', 'adts')",
  ).execute();

  const records = app.findCollectionByNameOrId("audio_records");
  records.fields.add(new NumberField({
    name: "quota_at",
    onlyInt: true,
    min: 0,
    help: "When the recording's audio was charged to its sender's daily quota (unix ms): its upload, or the sender's " +
      "resume of an over_quota halt. Kept by the server.",
  }));
  records.indexes.push("CREATE INDEX idx_audio_records_owner_quota ON audio_records (owner, quota_at)");
  app.save(records);
  app.db().newQuery(
    "UPDATE audio_records SET quota_at = CAST(ROUND((julianday(created) - 2440587.5) * 86400000) AS INTEGER) " +
    "WHERE quota_at = 0").execute();
}, (app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  records.indexes = records.indexes.filter((i) => i.indexOf("idx_audio_records_owner_quota") < 0);
  records.fields.removeByName("quota_at");
  app.save(records);
  const files = app.findCollectionByNameOrId("files");
  files.fields.removeByName("browser_plays");
  files.fields.removeByName("codec");
  const role = files.fields.getByName("role");
  role.values = role.values.filter((v) => v !== "playable");
  app.save(files);
});
