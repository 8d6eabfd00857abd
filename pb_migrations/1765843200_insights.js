/// <reference path="../pb_data/types.d.ts" />
// Insights: a grounded brief and up to five topics for a finished recording,
// the first optional step (seed 004's llm-insights-adapter).
//
// The work is its own queue, beside the recordings' one: an `insights` row per
// recording, with the same queue fields and the same transitions (lib/queue.js),
// so a lease, attempts, a postpone, a halt with a stable code and the journal
// hold for it as for every stage, while the recording itself stays `done` and
// its transcript visible whatever happens here. The claim hands insights out
// only to a worker that asks for them, and only when no recording waits.
//
// What the step writes lands where the seeds put it: `audio_records.brief`
// and `audio_records.topics` (a relation to the owner's dictionary in
// `topics`); the quotes that ground each sentence of the brief stay on the
// insights row, beside the brief they were made for.
migrate((app) => {
  const SERVICE = "@request.auth.collectionName = 'services'";
  const KEPT = "Kept by the pipeline: an edit here is ignored.";
  const records = app.findCollectionByNameOrId("audio_records");
  const halt = records.fields.getByName("halt_code");
  if (halt.values.indexOf("unparsable_answer") < 0) halt.values = halt.values.concat(["unparsable_answer"]);
  records.fields.getByName("brief").help =
    "A few sentences on what was said and decided, written by the insights step (each backed by a quote: see its " +
    "insights row) or by you. An edit here is kept: the step never writes over it.";
  records.fields.getByName("topics").help =
    "Up to five topics from the sender's dictionary (the topics collection), chosen by the insights step or by you.";
  app.save(records);

  const insights = new Collection({
    type: "base",
    name: "insights",
    listRule: SERVICE, viewRule: SERVICE, createRule: null, updateRule: null, deleteRule: null,
    fields: [
      { name: "record", type: "relation", required: true, collectionId: records.id, maxSelect: 1, cascadeDelete: false,
        presentable: true, help: "The recording this brief and these topics are about." },
      { name: "state", type: "select", required: true, maxSelect: 1, values: ["queued", "done"],
        help: "queued: the step will run (set it back to queued and save to run it again); done: it ran, or was " +
          "skipped (the journal says why)." },
      { name: "halted_at", type: "date",
        help: "Set while the step is halted (the recording itself is not). Clear it to try again." },
      { name: "halt_code", type: "select", maxSelect: 1, values: halt.values,
        help: "Why the step halted, as a stable class." },
      { name: "halt_reason", type: "text", max: 2000, help: "Why the step halted, in words." },
      { name: "language", type: "text", max: 10, help: "The language of the brief (the transcript's)." },
      { name: "quotes", type: "json", maxSize: 1024 * 1024,
        help: "Each sentence of the brief with the quote that backs it, found in the transcript, and its time " +
          "(seconds): [{sentence, quote, start, end}]." },
      { name: "quotes_for", type: "text", max: 5000,
        help: "The brief these quotes were written for; once you edit the brief, they no longer describe it. " + KEPT },
      { name: "proposed", type: "number", onlyInt: true, min: 0,
        help: "Sentences the model proposed; those whose quote is not in the transcript were dropped." },
      { name: "kept", type: "number", onlyInt: true, min: 0, help: "Sentences kept: their quotes are in the transcript." },
      { name: "provider", type: "text", max: 50, help: "offline or openai." },
      { name: "model", type: "text", max: 300 },
      { name: "attempts", type: "number", onlyInt: true, min: 0, help: "Claims since the last success. " + KEPT },
      { name: "state_entered_at", type: "number", onlyInt: true, min: 0, help: KEPT },
      { name: "claim_token", type: "text", max: 100, help: KEPT },
      { name: "claim_expires_at", type: "number", onlyInt: true, min: 0, help: KEPT },
      { name: "paused_until", type: "number", onlyInt: true, min: 0, help: KEPT },
      { name: "available_at", type: "number", onlyInt: true, min: 0, help: "Claim order key (unix ms); 0 = never. " + KEPT },
      { name: "queue_rev", type: "number", onlyInt: true, min: 0, help: KEPT },
      { name: "progress", type: "number", min: 0, max: 1, help: "Parts of the transcript read, 0 to 1. " + KEPT },
      { name: "progress_at", type: "number", onlyInt: true, min: 0, help: KEPT },
      { name: "activity", type: "text", max: 50, help: KEPT },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
      { name: "updated", type: "autodate", onCreate: true, onUpdate: true },
    ],
    indexes: [
      "CREATE UNIQUE INDEX idx_insights_record ON insights (record)",
      "CREATE INDEX idx_insights_claim ON insights (available_at, id)",
    ],
  });
  app.save(insights);

  const topics = app.findCollectionByNameOrId("topics");
  topics.fields.getByName("name").help =
    "A topic of this sender's dictionary: the insights step reuses these and adds one only when none fits.";
  app.save(topics);
}, (app) => {
  app.delete(app.findCollectionByNameOrId("insights"));
  const records = app.findCollectionByNameOrId("audio_records");
  const halt = records.fields.getByName("halt_code");
  halt.values = halt.values.filter((v) => v !== "unparsable_answer");
  records.fields.getByName("brief").help = "A short description (owner's field: the pipeline never changes it).";
  records.fields.getByName("topics").help = "The sender's topics this recording is filed under.";
  app.save(records);
});
