/// <reference path="../pb_data/types.d.ts" />
// When a follow-up row's previous claim's lease ran out, written by the claim itself (the
// old `claim_expires_at`), as a recording's has been (1765800000_lease_ended_at.js): the
// stall watchdog counts a step's time only while someone was working on it. Without it, a
// literary text whose worker was killed and whose service then stayed down for an hour was
// halted as stalled the moment it was claimed again.
//
// The column is a time like the others: each queue's `_times` view
// (1766880000_readable_times.js) shows it as a date too.
const QUEUES = ["literary", "insights"];
const ROWS = ["record", "state", "halted_at"];
const TIMES = ["state_entered_at", "paused_until", "claim_expires_at", "available_at", "progress_at"];

// A time column as a date, as the readable-times migration shows every other one.
function asDate(name) {
  const column = "t." + name;
  return "CAST(CASE WHEN " + column + " = 0 THEN '' " +
    "WHEN typeof(" + column + ") IN ('integer', 'real') " +
    "THEN COALESCE(strftime('%Y-%m-%d %H:%M:%fZ', " + column + " / 1000.0, 'unixepoch'), CAST(" + column + " AS TEXT)) " +
    "ELSE CAST(" + column + " AS TEXT) END AS TEXT) AS " + name;
}

function viewQuery(queue, times) {
  const columns = ["id"].concat(ROWS).map((c) => "t." + c + " AS " + c).concat(times.map(asDate));
  return "SELECT " + columns.join(", ") + " FROM " + queue + " t";
}

migrate((app) => {
  for (const name of QUEUES) {
    const queue = app.findCollectionByNameOrId(name);
    queue.fields.add(new NumberField({
      name: "lease_ended_at",
      onlyInt: true,
      min: 0,
      help: "When the previous claim's lease ran out (unix ms; 0: it was handed back). Kept by the pipeline: an " +
        "edit here is ignored. Readable as a date in the " + name + "_times view.",
    }));
    app.save(queue);
    const view = app.findCollectionByNameOrId(name + "_times");
    view.viewQuery = viewQuery(name, TIMES.concat(["lease_ended_at"]));
    app.save(view);
  }
}, (app) => {
  for (const name of QUEUES) {
    const view = app.findCollectionByNameOrId(name + "_times");
    view.viewQuery = viewQuery(name, TIMES);
    app.save(view);
    const queue = app.findCollectionByNameOrId(name);
    queue.fields.removeByName("lease_ended_at");
    app.save(queue);
  }
});
