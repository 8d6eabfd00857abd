/// <reference path="../pb_data/types.d.ts" />
// The pipeline's moments, readable in the admin panel.
//
// The queue's times are numbers (unix ms): the claim orders and compares them in
// SQL (`available_at <= now`, its index), every fenced write sets them in one
// UPDATE, and the sidecar reads them as counts — so they stay numbers, and the
// panel shows each as a 13-digit integer. For each collection that holds such
// a time, a read-only view (superusers only: no rule opens it) shows the same
// rows with each time as a date and time in UTC, under the column's own name:
// `audio_records_times` for `audio_records`, and so on (the panel lists views
// after the collections).
// Views are queries: they read the rows as they are now, an existing database's
// as well, and change nothing the pipeline reads or writes. 0 (not set) shows
// empty; a value that is no time (a hand edit) shows as it is stored.
//
// Each time field's help names its view.

// Each collection with its times, and the columns that say which row it is.
const TIMES = {
  audio_records: {
    rows: ["title", "state", "halted_at", "owner"],
    times: ["state_entered_at", "paused_until", "claim_expires_at", "available_at", "progress_at", "lease_ended_at",
      "quota_at"],
  },
  insights: {
    rows: ["record", "state", "halted_at"],
    times: ["state_entered_at", "paused_until", "claim_expires_at", "available_at", "progress_at"],
  },
  literary: {
    rows: ["record", "state", "halted_at"],
    times: ["state_entered_at", "paused_until", "claim_expires_at", "available_at", "progress_at"],
  },
  files: { rows: ["record", "role", "name"], times: ["removed_at"] },
  recognition_attempts: { rows: ["record", "provider", "status"], times: ["copies_removed_at"] },
};

function readable(name) {
  // The format of PocketBase's own date columns: "2026-12-06 05:12:11.123Z".
  const column = "t." + name;
  return "CAST(CASE WHEN " + column + " = 0 THEN '' " +
    "WHEN typeof(" + column + ") IN ('integer', 'real') " +
    "THEN COALESCE(strftime('%Y-%m-%d %H:%M:%fZ', " + column + " / 1000.0, 'unixepoch'), CAST(" + column + " AS TEXT)) " +
    "ELSE CAST(" + column + " AS TEXT) END AS TEXT) AS " + name;
}

function viewQuery(collection) {
  const spec = TIMES[collection];
  const columns = ["id"].concat(spec.rows).map((c) => "t." + c + " AS " + c).concat(spec.times.map(readable));
  return "SELECT " + columns.join(", ") + " FROM " + collection + " t";
}

function helpNote(collection) {
  return "Readable as a date in the " + collection + "_times view.";
}

migrate((app) => {
  for (const collection in TIMES) {
    const view = new Collection({ type: "view", name: collection + "_times", viewQuery: viewQuery(collection) });
    app.save(view);
    const source = app.findCollectionByNameOrId(collection);
    for (const name of TIMES[collection].times) {
      const field = source.fields.getByName(name);
      field.help = (field.help ? field.help + " " : "") + helpNote(collection);
    }
    app.save(source);
  }
}, (app) => {
  for (const collection in TIMES) {
    app.delete(app.findCollectionByNameOrId(collection + "_times"));
    const source = app.findCollectionByNameOrId(collection);
    for (const name of TIMES[collection].times) {
      const field = source.fields.getByName(name);
      const note = helpNote(collection);
      if (field.help === note) field.help = "";
      else if (field.help.endsWith(" " + note)) field.help = field.help.slice(0, -note.length - 1);
    }
    app.save(source);
  }
});
