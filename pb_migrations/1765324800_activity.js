/// <reference path="../pb_data/types.d.ts" />
// What a worker is doing with a recording right now (the poll's `activity`).
//
// The poll derives most of it from the stage and whether a worker holds the
// record; a step may report a finer word (the offline engine's
// "finding_speakers") with its fenced progress write, and this column keeps
// it while that claim lasts: every claim and every transition that ends a
// claim clears it. The values are the closed list the poll answers with
// (sidecar/activity.py mirrors it; a test holds the two together); a step may
// store only the ones that describe work.

const ACTIVITIES = [
  "queued", "normalizing", "recognizing", "finding_speakers", "waiting_for_provider", "finalizing", "done", "halted",
];

migrate((app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  records.fields.add(new SelectField({
    name: "activity",
    maxSelect: 1,
    values: ACTIVITIES,
    help: "What the worker holding this recording last said it is doing (empty: nothing finer than the stage). " +
      "Shown to the sender while the claim lasts. Kept by the pipeline: an edit here is ignored.",
  }));
  app.save(records);
}, (app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  records.fields.removeByName("activity");
  app.save(records);
});
