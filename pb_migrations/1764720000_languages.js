/// <reference path="../pb_data/types.d.ts" />
// Languages (SPEC L3): the language a sender asked for at intake and the
// language the recognition found, on each recording.
//
// Both are selects over the same closed list, Whisper's language codes
// (sidecar/languages.py mirrors it; a test holds the two together). Intake
// refuses a hint outside the list; the pipeline writes a found language only
// from the list.

const CODES = [
  "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id", "hi",
  "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg", "lt", "la",
  "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy",
  "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be",
  "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
  "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue",
];

migrate((app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  records.fields.add(new SelectField({
    name: "language_hint",
    maxSelect: 1,
    values: CODES,
    help: "The language the sender named at upload (empty: not named). Recognition uses it instead of finding one.",
  }));
  records.fields.add(new SelectField({
    name: "language",
    maxSelect: 1,
    values: CODES,
    help: "The language of the transcript, as recognition found it (or as the sender named it). Kept by the pipeline.",
  }));
  app.save(records);
}, (app) => {
  const records = app.findCollectionByNameOrId("audio_records");
  records.fields.removeByName("language");
  records.fields.removeByName("language_hint");
  app.save(records);
});
