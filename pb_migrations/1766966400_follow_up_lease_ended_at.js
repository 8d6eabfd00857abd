/// <reference path="../pb_data/types.d.ts" />
// When a follow-up row's previous claim's lease ran out, written by the claim itself (the
// old `claim_expires_at`), as a recording's has been (1765800000_lease_ended_at.js): the
// stall watchdog counts a step's time only while someone was working on it. Without it, a
// literary text whose worker was killed and whose service then stayed down for an hour was
// halted as stalled the moment it was claimed again.
const QUEUES = ["literary", "insights"];

migrate((app) => {
  for (const name of QUEUES) {
    const queue = app.findCollectionByNameOrId(name);
    queue.fields.add(new NumberField({
      name: "lease_ended_at",
      onlyInt: true,
      min: 0,
      help: "When the previous claim's lease ran out (unix ms; 0: it was handed back). Kept by the pipeline: an " +
        "edit here is ignored.",
    }));
    app.save(queue);
  }
}, (app) => {
  for (const name of QUEUES) {
    const queue = app.findCollectionByNameOrId(name);
    queue.fields.removeByName("lease_ended_at");
    app.save(queue);
  }
});
