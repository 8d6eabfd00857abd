/// <reference path="../pb_data/types.d.ts" />
// A halt code for a record the claim could not read: rather than fail every
// claim behind it, the claim sets such a record aside (halted, the error in
// its journal) and the queue keeps moving. The owner fixes the field in the
// panel and clears the halt.
migrate((app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  const field = records.fields.getByName("halt_code");
  if (field.values.indexOf("unclaimable") < 0) field.values = field.values.concat(["unclaimable"]);
  app.save(records);
}, (app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  const field = records.fields.getByName("halt_code");
  field.values = field.values.filter((v) => v !== "unclaimable");
  app.save(records);
});
