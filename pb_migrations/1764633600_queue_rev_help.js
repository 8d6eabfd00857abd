/// <reference path="../pb_data/types.d.ts" />
// queue_rev now grows only when the stage or the halt changes (claims and
// postpones leave it alone): its help text says so. Presentation only.

const KEPT = "Kept by the pipeline: an edit here is ignored.";
const NOW = "Grows when the stage or the halt changes; a save from a form opened before such a change keeps " +
  "the newer stage and halt. " + KEPT;
const BEFORE = "Grows with every pipeline change; a save from a form opened before the last change keeps the " +
  "newer queue fields. " + KEPT;

function setHelp(app, help) {
  const collection = app.findCollectionByNameOrId("audio_records");
  collection.fields.getByName("queue_rev").help = help;
  app.save(collection);
}

migrate((app) => setHelp(app, NOW), (app) => setHelp(app, BEFORE));
