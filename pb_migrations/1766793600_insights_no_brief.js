/// <reference path="../pb_data/types.d.ts" />
// Why a recording has no brief: the insights step ended without one (no
// speech, or the model's answers gave no sentence the transcript backs even
// when asked more simply). The owner reads the reason on the insights row;
// the sender's page says "no brief for this recording" (the poll's
// `brief_missing_reason` is the code) instead of leaving the space empty.
migrate((app) => {
  const insights = app.findCollectionByNameOrId("insights");
  insights.fields.add(new SelectField({
    name: "no_brief",
    maxSelect: 1,
    values: ["no_speech", "nothing_usable"],
    help: "Set when the step ended without a brief: no_speech (the transcript says nothing), nothing_usable (the " +
      "model's answers, asked twice, gave no sentence the transcript backs). Kept by the pipeline: an edit here is ignored.",
  }));
  insights.fields.add(new TextField({
    name: "no_brief_reason",
    max: 2000,
    help: "Why there is no brief, in words (the journal has what was dropped and why). Set the state back to queued " +
      "to try again, or write the brief yourself on the recording. Kept by the pipeline: an edit here is ignored.",
  }));
  app.save(insights);
}, (app) => {
  const insights = app.findCollectionByNameOrId("insights");
  insights.fields.removeByName("no_brief");
  insights.fields.removeByName("no_brief_reason");
  app.save(insights);
});
