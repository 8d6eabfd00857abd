/// <reference path="../pb_data/types.d.ts" />
// No stored copy outgrows its use: the normalized audio of a finished
// recording is the provider's input, read by nobody once the transcript is
// stored. A sweep removes its blob some time after the recording is done
// (`[pipeline] keep_normalized`); the `files` row stays as history, saying
// when its blob went. The original and the transcript are kept.
migrate((app) => {
  const files = app.findCollectionByNameOrId("files");
  files.fields.add(new NumberField({
    name: "removed_at", onlyInt: true, min: 0,
    help: "When this normalized copy's blob was removed, its recording done (unix ms); 0 = kept. " +
      "The row stays as history; set the recording's stage to uploaded to normalize again.",
  }));
  files.indexes.push("CREATE INDEX idx_files_role_removed ON files (role, removed_at)");
  app.save(files);
}, (app) => {
  const files = app.findCollectionByNameOrId("files");
  files.indexes = files.indexes.filter((i) => i.indexOf("idx_files_role_removed") < 0);
  files.fields.removeByName("removed_at");
  app.save(files);
});
