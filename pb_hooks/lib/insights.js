// Insights: what the step reads, what it writes, and what senders and the
// owner see of it (a brief grounded in quotes, up to five topics).
const datetimes = require("./datetimes.js");
const journal = require("./journal.js");
const live = require("./live.js");
const records = require("./records.js");
const stages = require("./stages.js");
const transitions = require("./transitions.js");

const MAX_TOPICS = 5;
const MAX_QUOTES = 20;
// Why a recording has no brief (the step's `no_brief`), as the schema's select has it.
const NO_BRIEF = ["no_speech", "nothing_usable"];

// The row of a recording's insights, or null.
function rowOf(app, recordId) {
  const found = app.findRecordsByFilter("insights", "record = {:id}", "", 1, 0, { id: recordId });
  return found.length > 0 ? found[0] : null;
}

function parsedJson(raw) {
  const text = toString(raw);
  if (!text || text === "null") return null;
  return JSON.parse(text);
}

// The step's input: the transcript and the owner's dictionary, the owner taken from the row's recording.
function source(tx, row) {
  const rec = tx.findRecordById("audio_records", row.getString("record"));
  const t = records.transcriptOf(tx, rec.id);
  const segments = t ? parsedJson(t.get("segments")) : null;
  const dictionary = tx.findRecordsByFilter("topics", "owner = {:o}", "name", 0, 0, { o: rec.getString("owner") });
  return {
    text: t ? t.getString("content") : "",
    segments: Array.isArray(segments) ? segments : [],
    language: rec.getString("language"),
    title: rec.getString("title"),
    topics: dictionary.map((d) => d.getString("name")),
  };
}

function str(v, max) {
  return typeof v === "string" ? v.slice(0, max) : "";
}

function finite(v) {
  const n = Number(v);
  return typeof v === "number" && isFinite(n) ? Math.min(Math.max(n, 0), 1e7) : 0;
}

// The step's answer, checked again here (the sidecar checked it against the
// transcript), written in the claim's transaction.
function store(tx, row, body, now) {
  const rec = tx.findRecordById("audio_records", row.getString("record"));
  const owner = rec.getString("owner");
  const brief = str(body.brief, 5000);
  const quotes = (Array.isArray(body.quotes) ? body.quotes : []).slice(0, MAX_QUOTES).map((q) => ({
    sentence: str(q && q.sentence, 2000), quote: str(q && q.quote, 2000), start: finite(q && q.start), end: finite(q && q.end),
  }));
  const names = [];
  for (const n of Array.isArray(body.topics) ? body.topics : []) {
    const name = str(n, 200).trim();
    if (name !== "" && names.indexOf(name) < 0 && names.length < MAX_TOPICS) names.push(name);
  }
  const ids = [];
  for (const name of names) {
    const found = tx.findRecordsByFilter("topics", "owner = {:o} && name = {:n}", "", 1, 0, { o: owner, n: name });
    let topic = found.length > 0 ? found[0] : null;
    if (!topic) {
      topic = new Record(tx.findCollectionByNameOrId("topics"));
      topic.set("owner", owner);
      topic.set("name", name);
      tx.save(topic);
    }
    ids.push(topic.id);
  }
  // Raw SQL: the recording's queue fields and its owner's edits are not this write's (the
  // panel's merge runs on saves only); queue_rev tells a form opened before it that it is outdated.
  tx.db().newQuery(
    "UPDATE audio_records SET brief = {:brief}, topics = {:topics}, queue_rev = queue_rev + 1, updated = {:upd} WHERE id = {:id}",
  ).bind({ id: rec.id, brief: brief, topics: JSON.stringify(ids), upd: datetimes.dbTime(now) }).execute();
  row.set("quotes", quotes);
  row.set("quotes_for", brief);
  row.set("language", str(body.language, 10));
  row.set("provider", str(body.provider, 50));
  row.set("model", str(body.model, 300));
  row.set("proposed", Math.floor(finite(body.proposed)));
  row.set("kept", Math.floor(finite(body.kept)));
  // No brief: why (the owner reads it here, the sender's poll gets the code); a brief clears an earlier one.
  const missing = brief === "" && NO_BRIEF.indexOf(body.no_brief) >= 0 ? body.no_brief : "";
  row.set("no_brief", missing);
  row.set("no_brief_reason", missing === "" ? "" : str(body.no_brief_reason, 2000));
  tx.save(row);
  // The sender's page shows the brief as soon as it is written (or that none is coming: read from the row).
  live.publish(tx, rec.id);
}

// What a sender and the exports see: the brief and the topics once written
// (null and [] before), and the quotes while they still describe the brief.
function view(app, rec, withQuotes) {
  const brief = rec.getString("brief");
  const out = { brief: brief === "" ? null : brief, topics: records.topicNames(app, rec) };
  if (withQuotes) {
    const row = rowOf(app, rec.id);
    const quotes = row && brief !== "" && row.getString("quotes_for") === brief ? parsedJson(row.get("quotes")) : null;
    out.quotes = Array.isArray(quotes) ? quotes : [];
  }
  return out;
}

// The owner changed the brief or the topics in the panel: the step never writes
// over them. A queued (or running) insights row is ended, its claim released, so
// a result on its way is fenced out.
function ownerEdited(app, recordId, now) {
  const row = rowOf(app, recordId);
  if (!row || row.getString("state") !== stages.QUEUED) return;
  // Through the transition table, as every queue write: the owner set it done.
  transitions.setOn(row, row, "stage_set", now, { to: stages.DONE });
  app.save(row);
  journal.add(app, recordId, stages.INSIGHTS_JOURNAL_STAGE, "note",
    "the brief or the topics were edited by the owner: the insights step stops and will not write over them " +
    "(set the insights row's state to queued to run it again)", "owner");
}

module.exports = { source: source, store: store, view: view, ownerEdited: ownerEdited };
