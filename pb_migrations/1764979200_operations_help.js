/// <reference path="../pb_data/types.d.ts" />
// Help texts for the operations changes (presentation only): a stale panel
// save is refused, not half-applied; stage `uploaded` normalizes again.

const AFTER = {
  audio_records: {
    state: "The stage: uploaded → normalized → submitted → transcribed → done. Changing it and saving restarts " +
      "the record from that stage, journalled: uploaded normalizes again (the old file kept, superseded), " +
      "normalized recognizes again.",
    halted_at: "Set while the record is halted: the pipeline leaves it alone. Halt: pick any date, say why in " +
      "halt_reason, save. Resume: clear the date, save. A form opened before the pipeline moved the record is " +
      "refused: reopen the record.",
  },
};

// As 1764547200_panel_presentation.js left them.
const BEFORE = {
  audio_records: {
    state: "The stage: uploaded → normalized → submitted → transcribed → done. Changing it and saving " +
      "restarts the record from that stage (claim released, attempts reset); the change is journalled.",
    halted_at: "Set while the record is halted: the pipeline leaves it alone. Halt: pick any date, say why in " +
      "halt_reason, save. Resume from the stage: clear the date, save. If the pipeline moved the record " +
      "after this form was opened, neither is applied (the journal notes it): reopen the record.",
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
