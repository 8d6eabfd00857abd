/// <reference path="../pb_data/types.d.ts" />
// Help texts for two behaviours of the panel (presentation only):
// - queue_rev grows only when the stage or the halt changes (claims and
//   postpones leave it alone), so a record being polled can still be changed;
// - an attempt can be `failed` (its operation is lost: never polled again) or
//   `superseded` (the owner set the stage back: submit starts a new one).

const KEPT = "Kept by the pipeline: an edit here is ignored.";

const AFTER = {
  audio_records: {
    queue_rev: "Grows when the stage or the halt changes; a save from a form opened before such a change keeps " +
      "the newer stage and halt. " + KEPT,
  },
  recognition_attempts: {
    status: "started, running, ready (raw response stored), cleaned (transcript stored, the provider-side copy " +
      "removed), failed (the operation is lost; set the recording's stage to normalized to recognize again) or " +
      "superseded (the owner set the stage back; a new attempt follows).",
  },
};

// As 1764547200_panel_presentation.js left them.
const BEFORE = {
  audio_records: {
    queue_rev: "Grows with every pipeline change; a save from a form opened before the last change keeps the " +
      "newer queue fields. " + KEPT,
  },
  recognition_attempts: {
    status: "started, running, ready (raw response stored), failed, cleaned (transcript stored, the provider-side " +
      "copy removed).",
  },
};

function setHelp(app, spec) {
  for (const name of Object.keys(spec)) {
    const collection = app.findCollectionByNameOrId(name);
    for (const [field, help] of Object.entries(spec[name])) collection.fields.getByName(field).help = help;
    app.save(collection);
  }
}

migrate((app) => setHelp(app, AFTER), (app) => setHelp(app, BEFORE));
