/// <reference path="../pb_data/types.d.ts" />
// The literary text (seed 004's literary-text-level): the transcript edited to be read,
// made after recognition on a follow-up queue of its own, beside the brief's.
//
// The queue is a `literary` row per finished recording with the queue fields every
// follow-up row holds (the insights migration's), driven by the same claim, transitions
// and journal (pb_hooks/lib/followups.js declares it); the text itself is the recording's
// `texts` row of kind `literary` (the first migration made its place), its paragraphs in
// `segments` with their time spans and speakers. The brief and the literary text are
// independent: either can be run again alone, and a failure of one never redoes the other.
migrate((app) => {
  const SERVICE = "@request.auth.collectionName = 'services'";
  const KEPT = "Kept by the pipeline: an edit here is ignored.";
  const records = app.findCollectionByNameOrId("audio_records");
  const halt = records.fields.getByName("halt_code");

  const literary = new Collection({
    type: "base",
    name: "literary",
    listRule: SERVICE, viewRule: SERVICE, createRule: null, updateRule: null, deleteRule: null,
    fields: [
      { name: "record", type: "relation", required: true, collectionId: records.id, maxSelect: 1, cascadeDelete: false,
        presentable: true, help: "The recording whose literary text this is (its texts row of kind literary)." },
      { name: "state", type: "select", required: true, maxSelect: 1, values: ["queued", "done"],
        help: "queued: the text will be made (set it back to queued and save to make it again; a correction of the " +
          "transcript does so too); done: the text in texts is up to date." },
      { name: "halted_at", type: "date",
        help: "Set while the step is halted (the recording itself is not). Clear it to try again." },
      { name: "halt_code", type: "select", maxSelect: 1, values: halt.values,
        help: "Why the step halted, as a stable class." },
      { name: "halt_reason", type: "text", max: 2000, help: "Why the step halted, in words." },
      { name: "language", type: "text", max: 10, help: "The language of the text (the transcript's)." },
      { name: "attempts", type: "number", onlyInt: true, min: 0, help: "Claims since the last success. " + KEPT },
      { name: "state_entered_at", type: "number", onlyInt: true, min: 0, help: KEPT },
      { name: "claim_token", type: "text", max: 100, help: KEPT },
      { name: "claim_expires_at", type: "number", onlyInt: true, min: 0, help: KEPT },
      { name: "paused_until", type: "number", onlyInt: true, min: 0, help: KEPT },
      { name: "available_at", type: "number", onlyInt: true, min: 0, help: "Claim order key (unix ms); 0 = never. " + KEPT },
      { name: "queue_rev", type: "number", onlyInt: true, min: 0, help: KEPT },
      { name: "progress", type: "number", min: 0, max: 1, help: KEPT },
      { name: "progress_at", type: "number", onlyInt: true, min: 0, help: KEPT },
      { name: "activity", type: "text", max: 50, help: KEPT },
      { name: "created", type: "autodate", onCreate: true, onUpdate: false },
      { name: "updated", type: "autodate", onCreate: true, onUpdate: true },
    ],
    indexes: [
      "CREATE UNIQUE INDEX idx_literary_record ON literary (record)",
      "CREATE INDEX idx_literary_claim ON literary (available_at, id)",
    ],
  });
  app.save(literary);

  const texts = app.findCollectionByNameOrId("texts");
  const kind = texts.fields.getByName("kind");
  kind.help = "transcript: what recognition heard (the owner may correct its content); literary: the same words " +
    "edited to be read (paragraphs, no fillers, the language's typography), made by the literary step.";
  // The literary text as a Word document, made by the step with the text (the sender downloads it).
  texts.fields.add(new FileField({
    name: "document", maxSelect: 1, maxSize: 200 * 1024 * 1024, protected: true,
    mimeTypes: ["application/vnd.openxmlformats-officedocument.wordprocessingml.document"],
    help: "The literary text as a Word document (DOCX), made with it by the literary step.",
  }));
  app.save(texts);
}, (app) => {
  app.delete(app.findCollectionByNameOrId("literary"));
  const texts = app.findCollectionByNameOrId("texts");
  texts.fields.removeByName("document");
  app.save(texts);
});
