// The journal (`record_events`): what happened to a recording, at which stage, by whom
// ("intake", "worker", "owner", "sender"). Rows are only ever added: through the records
// API, the panel included, the journal is read-only (panel.pb.js).
const followups = require("./followups.js");

// Adds a row to `recordId`'s journal, inside the caller's transaction (`app`). `writeKey`:
// the key of the write that made it, so that a write repeated after its answer was lost
// finds it (O4).
function add(app, recordId, stage, kind, text, actor, writeKey) {
  const ev = new Record(app.findCachedCollectionByNameOrId("record_events"));
  ev.set("record", recordId);
  ev.set("stage", stage);
  ev.set("kind", kind);
  ev.set("outcome_text", String(text || "").slice(0, 5000));
  ev.set("actor", actor);
  if (writeKey) ev.set("write_key", writeKey);
  app.save(ev);
}

// Where the events of a row of a queue go: [the recording's id, the stage they name]. A
// follow-up row's go on its recording's journal, under its queue's stage ("insights", "literary").
function at(table, rec) {
  const queue = followups.of(table);
  return queue ? [rec.getString("record"), queue.journal] : [rec.id, rec.getString("state")];
}

module.exports = { add: add, at: at };
