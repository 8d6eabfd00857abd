/// <reference path="../pb_data/types.d.ts" />
// Operations (SPEC O4, O6, O9):
// - write_key on the pipeline's rows: a write repeated after PocketBase went
//   away mid-request finds the row it already made instead of making another;
// - a normalized file can be superseded: the owner set the stage back to
//   uploaded, so the next normalize makes a fresh one (the old stays as history);
// - an attempt records when its provider-side copies (the uploaded audio, the
//   provider's stored results) were removed, or why they could not be.

const KEY_HELP = "The pipeline's key for this write: a repeat of the same write finds this row.";

migrate((app) => {
  for (const name of ["files", "recognition_attempts", "record_events"]) {
    const c = app.findCollectionByNameOrId(name);
    c.fields.add(new TextField({ name: "write_key", max: 100, help: KEY_HELP }));
    c.indexes.push("CREATE INDEX idx_" + name + "_write_key ON " + name + " (record, write_key)");
    app.save(c);
  }
  const files = app.findCollectionByNameOrId("files");
  files.fields.add(new BoolField({
    name: "superseded",
    help: "An older normalized copy, kept as history: the owner set the stage back to uploaded and normalize made a new one.",
  }));
  app.save(files);
  const attempts = app.findCollectionByNameOrId("recognition_attempts");
  attempts.fields.add(new NumberField({
    name: "copies_removed_at", onlyInt: true, min: 0,
    help: "When the provider-side copies (uploaded audio, stored results) were removed (unix ms); 0 = not yet.",
  }));
  attempts.fields.add(new TextField({
    name: "copies_error", max: 2000,
    help: "Why the provider-side copies could not be removed yet; a periodic sweep tries again.",
  }));
  app.save(attempts);
}, (app) => {
  const attempts = app.findCollectionByNameOrId("recognition_attempts");
  attempts.fields.removeByName("copies_error");
  attempts.fields.removeByName("copies_removed_at");
  app.save(attempts);
  const files = app.findCollectionByNameOrId("files");
  files.fields.removeByName("superseded");
  app.save(files);
  for (const name of ["files", "recognition_attempts", "record_events"]) {
    const c = app.findCollectionByNameOrId(name);
    c.indexes = c.indexes.filter((i) => i.indexOf("_write_key ") < 0);
    c.fields.removeByName("write_key");
    app.save(c);
  }
});
