/// <reference path="../pb_data/types.d.ts" />
// Help texts (presentation only): the panel takes a date when its field loses
// focus, and until then "Save changes" stays disabled; the help says so, so that
// clearing the date alone resumes (no other field needs touching).

const AFTER = {
  audio_records: {
    halted_at: "Set while halted: the pipeline leaves it alone. Halt: pick a date, say why in halt_reason, " +
      "save. Resume: clear the date (Backspace in it), click any other field, save. A form opened before the " +
      "pipeline moved the record is refused: reopen it.",
  },
  insights: {
    halted_at: "Set while the step is halted (the recording itself is not). To try again: clear the date " +
      "(Backspace in it), click any other field, save.",
  },
};

// As 1764979200_operations_help.js and 1765843200_insights.js left them.
const BEFORE = {
  audio_records: {
    halted_at: "Set while the record is halted: the pipeline leaves it alone. Halt: pick any date, say why in " +
      "halt_reason, save. Resume: clear the date, save. A form opened before the pipeline moved the record is " +
      "refused: reopen the record.",
  },
  insights: {
    halted_at: "Set while the step is halted (the recording itself is not). Clear it to try again.",
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
