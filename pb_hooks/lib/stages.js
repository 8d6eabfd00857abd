// The stages, named once on the JS side.
//
// A recording's stages are the schema's `audio_records.state` values (the
// init migration), an insights row's the `insights.state` values (the
// insights migration); the sidecar's stage table (sidecar/pipeline/stages.py)
// names the same. tests/unit/test_js_mirrors.py reads this file and checks it
// against both, so a stage added in one place and not here fails a test
// instead of a claim.

// A recording's stages, in pipeline order.
const UPLOADED = "uploaded";
const NORMALIZED = "normalized";
const SUBMITTED = "submitted";
const TRANSCRIBED = "transcribed";
const DONE = "done";
const RECORDING = [UPLOADED, NORMALIZED, SUBMITTED, TRANSCRIBED, DONE];

// Stages with no step: a record there is never claimed.
const TERMINAL = [DONE];

// A follow-up row (lib/followups.js) is queued until its step is done (or the owner ends it).
const QUEUED = "queued";
const INSIGHTS = [QUEUED, DONE];
const FOLLOW_UP = INSIGHTS;

// The journal's stage for an insights row's events (they go on its recording's journal).
const INSIGHTS_JOURNAL_STAGE = "insights";

function isTerminal(stage) {
  return TERMINAL.indexOf(stage) >= 0;
}

// The stages the schema allows a row of `table` (audio_records, insights).
function allowed(app, table) {
  return app.findCachedCollectionByNameOrId(table).fields.getByName("state").values;
}

module.exports = {
  UPLOADED: UPLOADED, NORMALIZED: NORMALIZED, SUBMITTED: SUBMITTED, TRANSCRIBED: TRANSCRIBED, DONE: DONE,
  RECORDING: RECORDING, QUEUED: QUEUED, INSIGHTS: INSIGHTS, FOLLOW_UP: FOLLOW_UP,
  INSIGHTS_JOURNAL_STAGE: INSIGHTS_JOURNAL_STAGE, isTerminal: isTerminal, allowed: allowed,
};
