/// <reference path="../pb_data/types.d.ts" />
// The journal says what happened to a claim in the same word as everything
// else that names it (the settle route's `outcome`, the sidecar's `Outcome`,
// the metrics' `outcome` label): a finished step is `advanced` (was
// `stage_entered`), a failed try `failed` (was `step_failed`). The kinds that
// were already one word (postponed, halted, released) and the owner's and
// sender's own (accepted, resumed, stage_set, note) stay. Existing journal
// rows are renamed, so a filter on the new word finds the whole history.
const RENAMED = { stage_entered: "advanced", step_failed: "failed" };

const HELP = {
  after: "What happened: accepted (uploaded), advanced (a step finished: the stage entered), failed (a try " +
    "failed; retried later), postponed, halted, released (handed back on shutdown), resumed, stage_set (by the " +
    "owner) or note.",
  before: "What happened: accepted, stage_entered, step_failed, postponed, halted, resumed, stage_set, " +
    "released or note.",
};

// Each old word is replaced in its place in the select's list, and in the rows.
function rename(app, from, help) {
  const events = app.findCollectionByNameOrId("record_events");
  const kind = events.fields.getByName("kind");
  kind.values = kind.values.map((v) => from[v] || v);
  kind.help = help;
  app.save(events);
  for (const old of Object.keys(from)) {
    app.db().newQuery("UPDATE record_events SET kind = {:to} WHERE kind = {:from}").bind({ from: old, to: from[old] }).execute();
  }
}

function inverse(map) {
  const out = {};
  for (const k of Object.keys(map)) out[map[k]] = k;
  return out;
}

migrate((app) => rename(app, RENAMED, HELP.after), (app) => rename(app, inverse(RENAMED), HELP.before));
