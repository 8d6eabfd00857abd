/// <reference path="../pb_data/types.d.ts" />
// Attempt statuses become a closed list (a select), like stages and halt codes:
// sidecar/storage/model.py's AttemptStatus mirrors it and a test holds the two
// together. PocketBase cannot change a field's type in place, so the text field
// is replaced by a select of the same name, its values carried across.

const STATUSES = ["started", "running", "ready", "cleaned", "failed", "superseded"];
const HELP =
  "started, running, ready (raw response stored), cleaned (transcript stored, the provider-side copy removed), " +
  "failed (the operation is lost; set the recording's stage to normalized to recognize again) or superseded (the " +
  "owner set the stage back; a new attempt follows).";

function replaceStatus(app, makeField) {
  const rows = arrayOf(new DynamicModel({ id: "", status: "" }));
  app.db().newQuery("SELECT id, status FROM recognition_attempts").all(rows);
  const collection = app.findCollectionByNameOrId("recognition_attempts");
  const position = collection.fields.fieldNames().indexOf("status");
  collection.fields.removeByName("status");
  app.save(collection);
  const fresh = app.findCollectionByNameOrId("recognition_attempts");
  fresh.fields.addAt(position, makeField());
  app.save(fresh);
  for (const row of rows) {
    app.db().newQuery("UPDATE recognition_attempts SET status = {:status} WHERE id = {:id}")
      .bind({ id: row.id, status: row.status }).execute();
  }
}

migrate((app) => {
  const rows = arrayOf(new DynamicModel({ status: "" }));
  app.db().newQuery("SELECT DISTINCT status FROM recognition_attempts").all(rows);
  for (const row of rows) {
    if (row.status !== "" && STATUSES.indexOf(row.status) < 0) {
      throw new Error("recognition_attempts holds an unknown status '" + row.status + "'");
    }
  }
  replaceStatus(app, () => new SelectField({ name: "status", maxSelect: 1, values: STATUSES, help: HELP }));
}, (app) => {
  replaceStatus(app, () => new TextField({ name: "status", max: 50, help: HELP }));
});
