"""The closed vocabulary of spoken languages: Whisper's codes, and how each provider spells them.

The schema declares the same codes as the values of ``audio_records.language``
and ``language_hint`` (a select field): intake refuses a hint outside them
with a 400, and a test holds this list and the schema's to each other.

Providers speak other dialects of the same thing: OpenAI's ``verbose_json``
names a language in English words ("russian"), SpeechKit uses BCP-47 tags
(``ru-RU``). ``code_of`` reads any of them back into a code.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["AUTO", "LANGUAGES", "code_of", "is_known", "speechkit_tag"]

AUTO = "auto"

# Whisper's languages, code → English name (the order Whisper's tokenizer uses).
LANGUAGES: Mapping[str, str] = MappingProxyType(
    {
        "en": "english",
        "zh": "chinese",
        "de": "german",
        "es": "spanish",
        "ru": "russian",
        "ko": "korean",
        "fr": "french",
        "ja": "japanese",
        "pt": "portuguese",
        "tr": "turkish",
        "pl": "polish",
        "ca": "catalan",
        "nl": "dutch",
        "ar": "arabic",
        "sv": "swedish",
        "it": "italian",
        "id": "indonesian",
        "hi": "hindi",
        "fi": "finnish",
        "vi": "vietnamese",
        "he": "hebrew",
        "uk": "ukrainian",
        "el": "greek",
        "ms": "malay",
        "cs": "czech",
        "ro": "romanian",
        "da": "danish",
        "hu": "hungarian",
        "ta": "tamil",
        "no": "norwegian",
        "th": "thai",
        "ur": "urdu",
        "hr": "croatian",
        "bg": "bulgarian",
        "lt": "lithuanian",
        "la": "latin",
        "mi": "maori",
        "ml": "malayalam",
        "cy": "welsh",
        "sk": "slovak",
        "te": "telugu",
        "fa": "persian",
        "lv": "latvian",
        "bn": "bengali",
        "sr": "serbian",
        "az": "azerbaijani",
        "sl": "slovenian",
        "kn": "kannada",
        "et": "estonian",
        "mk": "macedonian",
        "br": "breton",
        "eu": "basque",
        "is": "icelandic",
        "hy": "armenian",
        "ne": "nepali",
        "mn": "mongolian",
        "bs": "bosnian",
        "kk": "kazakh",
        "sq": "albanian",
        "sw": "swahili",
        "gl": "galician",
        "mr": "marathi",
        "pa": "punjabi",
        "si": "sinhala",
        "km": "khmer",
        "sn": "shona",
        "yo": "yoruba",
        "so": "somali",
        "af": "afrikaans",
        "oc": "occitan",
        "ka": "georgian",
        "be": "belarusian",
        "tg": "tajik",
        "sd": "sindhi",
        "gu": "gujarati",
        "am": "amharic",
        "yi": "yiddish",
        "lo": "lao",
        "uz": "uzbek",
        "fo": "faroese",
        "ht": "haitian creole",
        "ps": "pashto",
        "tk": "turkmen",
        "nn": "nynorsk",
        "mt": "maltese",
        "sa": "sanskrit",
        "lb": "luxembourgish",
        "my": "myanmar",
        "bo": "tibetan",
        "tl": "tagalog",
        "mg": "malagasy",
        "as": "assamese",
        "tt": "tatar",
        "haw": "hawaiian",
        "ln": "lingala",
        "ha": "hausa",
        "ba": "bashkir",
        "jw": "javanese",
        "su": "sundanese",
        "yue": "cantonese",
    }
)

# SpeechKit's tags for the languages it recognizes asynchronously. Its current v3
# list is not confirmed (PROVIDERS.md A.9); a language missing here is sent as no
# restriction at all, which lets SpeechKit find the language itself.
_SPEECHKIT: Mapping[str, str] = MappingProxyType(
    {
        "ru": "ru-RU",
        "en": "en-US",
        "de": "de-DE",
        "es": "es-ES",
        "fi": "fi-FI",
        "fr": "fr-FR",
        "he": "he-HE",
        "it": "it-IT",
        "kk": "kk-KZ",
        "nl": "nl-NL",
        "pl": "pl-PL",
        "pt": "pt-PT",
        "sv": "sv-SE",
        "tr": "tr-TR",
        "uz": "uz-UZ",
    }
)

_BY_NAME = {name: code for code, name in LANGUAGES.items()}
_ALIASES = {"jv": "jw", "iw": "he", "javanese": "jw", "haitian": "ht", "burmese": "my", "castilian": "es"}


def is_known(code: str) -> bool:
    return code in LANGUAGES


def code_of(value: str | None) -> str | None:
    """A code from a code, a BCP-47 tag (``ru-RU``) or an English name (``Russian``); None if unknown."""
    if not value:
        return None
    text = value.strip().lower().replace("_", "-")
    if text in LANGUAGES:
        return text
    if text in _BY_NAME:
        return _BY_NAME[text]
    if text in _ALIASES:
        return _ALIASES[text]
    primary = text.split("-", 1)[0]
    if primary != text:
        return code_of(primary)
    return None


def speechkit_tag(code: str) -> str | None:
    """SpeechKit's tag for ``code``, or None when SpeechKit is not known to take it."""
    return _SPEECHKIT.get(code)
