/// <reference path="../pb_data/types.d.ts" />
// One meaning per word: on a record (its journal, the settle route, the
// metrics) `failed` is a try that failed and is retried later; on a
// recognition attempt it meant the provider's operation is gone for good and
// a new attempt is needed. The attempt's word becomes `lost`, in its place in
// the select's list (sidecar/storage/model.py's AttemptStatus mirrors it).
// Existing rows are rewritten, so a filter on the new word finds them all:
// the new word joins the list, the rows move to it, then the old word goes
// (a select keeps rows whose value is not in its list, so the list never
// lacks a word some row still holds).
// The help names every status; only the renamed one's words differ.
const EARLIER = "started, running, ready (raw response stored), cleaned (transcript stored, the provider-side copy " +
  "removed), ";
const LATER = " or superseded (the owner set the stage back; a new attempt follows).";
const LOST_HELP = EARLIER + "lost (the provider's operation is gone for good, ended in an error or its results " +
  "expired: the piece needs a new attempt)" + LATER;
const FAILED_HELP = EARLIER + "failed (the operation is lost; set the recording's stage to normalized to " +
  "recognize again)" + LATER;

function setValues(app, values, help) {
  const attempts = app.findCollectionByNameOrId("recognition_attempts");
  const status = attempts.fields.getByName("status");
  status.values = values;
  status.help = help;
  app.save(attempts);
}

function rename(app, from, to, help) {
  const status = app.findCollectionByNameOrId("recognition_attempts").fields.getByName("status");
  const values = status.values.slice();
  const at = values.indexOf(from);
  if (at < 0) throw new Error("recognition_attempts.status has no value '" + from + "'");
  setValues(app, values.slice(0, at + 1).concat([to], values.slice(at + 1)), status.help);
  app.db().newQuery("UPDATE recognition_attempts SET status = {:to} WHERE status = {:from}")
    .bind({ from: from, to: to }).execute();
  setValues(app, values.map((v) => (v === from ? to : v)), help);
}

migrate(
  (app) => rename(app, "failed", "lost", LOST_HELP),
  (app) => rename(app, "lost", "failed", FAILED_HELP),
);
