// The page's words in English and Russian. The language comes from the
// browser (navigator.languages) until the sender picks the other one; the
// choice is kept in this browser (localStorage).

const KEY = "transcriber.lang";

const en = {
  "lang.name": "English",
  "app.loading": "Loading…",
  "signin.title": "Sign in",
  "signin.lead": "Sign in to upload recordings and read their transcripts.",
  "signin.email": "Email",
  "signin.password": "Password",
  "signin.submit": "Sign in",
  "signin.busy": "Signing in…",
  "signin.failed": "The email or the password is wrong.",
  "signin.forgot": "Forgot your password?",
  "signin.askOwner": "Forgot your password? Ask the owner of this service to set a new one.",
  "signout": "Sign out",
  "forgot.title": "Forgot your password?",
  "forgot.lead": "Enter your email: a link to set a new password will be sent to it.",
  "forgot.submit": "Send the link",
  "forgot.busy": "Sending…",
  "forgot.sent": "If an account has this email, a message with a link is on its way. Check your inbox.",
  "forgot.back": "Back to sign in",
  "forgot.noMail": "This service sends no mail, so no link can be sent. Ask its owner to set a new password for you (they run transcriber user password with your email).",
  "reset.title": "Set a new password",
  "reset.lead": "Choose a new password for your account.",
  "reset.submit": "Set the password",
  "reset.done": "Your new password is set. Sign in with it.",
  "reset.expired": "This link is no longer valid. Ask for a new one.",
  "reset.again": "Ask for a new link",
  "password.link": "Change password",
  "password.title": "Change your password",
  "password.current": "Current password",
  "password.new": "New password",
  "password.repeat": "New password again",
  "password.hint": "{min} to {max} characters. Your other devices will be signed out.",
  "password.submit": "Change the password",
  "password.busy": "Saving…",
  "password.cancel": "Cancel",
  "password.done": "Your password is changed; your other devices are signed out.",
  "password.mismatch": "The two new passwords are not the same.",
  "upload.title": "New recording",
  "upload.drop": "Drop audio or video files here",
  "upload.or": "or",
  "upload.choose": "Choose files",
  "upload.record": "Record a voice note",
  "upload.titleLabel": "Title (optional)",
  "upload.titleHint": "Left empty, each recording is named after its file.",
  "upload.language": "Language spoken",
  "upload.autoLanguage": "Find it automatically",
  "upload.sending": "Uploading {percent}%",
  "upload.checking": "Checking the file…",
  "upload.sent": "Uploaded",
  "upload.dismiss": "Dismiss",
  "record.recording": "Recording {time}",
  "record.stop": "Stop and send",
  "record.cancel": "Discard",
  "record.name": "Voice note {when}",
  "record.denied": "The microphone is not available: allow it for this page and try again.",
  "record.unsupported": "This browser cannot record audio.",
  "list.title": "Your recordings",
  "list.empty": "No recordings yet. Drop a file above, or record a voice note.",
  "list.range": "{first}–{last} of {total}",
  "list.newer": "Newer",
  "list.older": "Older",
  "list.untitled": "Untitled recording",
  "list.open": "Open",
  "list.live": "Updates live",
  "list.offline": "Reconnecting…",
  "record.back": "All recordings",
  "record.rename": "Rename",
  "record.renameLabel": "New title",
  "record.save": "Save",
  "record.cancelEdit": "Cancel",
  "record.uploaded": "Uploaded {when}",
  "record.resume": "Resume",
  "record.resumed": "Resumed: it is back in the queue.",
  "record.notFound": "There is no such recording.",
  "record.noSpeech": "No speech was found in this recording.",
  "record.progress": "{percent}% done",
  "eta.underMinute": "Less than a minute left",
  "eta.minutes": "About {n} minute left|About {n} minutes left",
  "eta.hours": "About {n} hour left|About {n} hours left",
  "record.waitingText": "The transcript appears here when it is ready. You can leave this page: the work goes on.",
  "player.label": "The recording",
  "player.retry": "The audio could not be loaded.",
  "transcript.title": "Transcript",
  "transcript.search": "Search the transcript",
  "transcript.matches": "{count} matching lines",
  "transcript.noMatches": "Nothing matches.",
  "transcript.download": "Download",
  "download.word": "Word document",
  "download.wordPending": "The Word document is being made with the text.",
  "transcript.playFrom": "Play from {time}",
  "view.label": "Show",
  "view.transcript": "Transcript",
  "view.text": "Text",
  "text.title": "Text",
  "text.pending": "The text is being prepared from the transcript.",
  "text.hint": "The transcript's words in paragraphs, without fillers and repeated words; nothing else is changed.",
  "text.empty": "No speech was found, so the text is empty.",
  "brief.title": "In brief",
  "brief.topics": "Topics",
  "brief.hint": "Written by a language model; each sentence comes with the words it rests on. Check them against the recording.",
  "brief.none": "No brief for this recording.",
  "brief.noneWhy.no_speech": "No speech was found in it.",
  "brief.noneWhy.nothing_usable": "The language model wrote nothing the recording backs.",
  "brief.noneWhy.insights_halted": "Writing it stopped; the service's owner can see why.",
  "activity.queued": "Queued",
  "activity.normalizing": "Preparing the audio",
  "activity.recognizing": "Recognizing speech",
  "activity.finding_speakers": "Finding the speakers",
  "speaker.numbered": "Speaker {n}",
  "activity.waiting_for_provider": "With the recognition service",
  "activity.finalizing": "Finishing",
  "activity.done": "Done",
  "activity.halted": "Stopped",
  "halt.attempts_exhausted": "It failed several times in a row.",
  "halt.stalled": "It stopped moving for too long.",
  "halt.unsupported_media": "The file could not be read as audio. Upload another file.",
  "halt.too_long": "The recording is longer than this service accepts.",
  "halt.provider_rejected": "The recognition service refused it; the owner of this service has to look at it.",
  "halt.provider_failed": "The recognition service failed on it.",
  "halt.results_expired": "The recognition result expired before it was collected.",
  "halt.halted_by_owner": "The owner of this service stopped it.",
  "halt.unclaimable": "It could not be processed; the owner of this service has to look at it.",
  "halt.over_quota": "It was stopped before being transcribed: it goes over your daily amount of audio (the audio of the last 24 hours counts).",
  "halt.unparsable_answer": "The brief could not be written: the language model's answers could not be read.",
  "halt.other": "It stopped ({code}).",
  "halt.canResume": "Another try may help.",
  "error.too_large": "{name} is too large: the most this service accepts is {limit}.",
  "error.not_audio": "{name} is not an audio or video file.",
  "error.empty_file": "{name} is empty.",
  "error.unknown_language": "This language is not on the list.",
  "error.title_too_long": "The title is too long: at most 500 characters.",
  "error.invalid_title": "The title holds a control character (an invisible one, or one that reorders the text): remove it.",
  "error.too_many_uploads": "You have uploaded as many recordings as allowed in an hour. Try again {when}.",
  "error.too_many_waiting": "Too many of your recordings are still being transcribed. Try again {when}.",
  "error.too_much_audio": "This would go over your daily amount of audio. Try again {when}.",
  "error.too_many_requests": "Too many attempts. Try again {when}.",
  "error.too_many_failed_logins": "Too many wrong passwords for this account. Try again {when}.",
  "error.wrong_password": "The current password is wrong.",
  "error.weak_password": "The new password must be {min} to {max} characters long.",
  "error.password_bytes": "The new password is {bytes} bytes long; at most {max_bytes} are accepted (a letter outside English takes 2 to 4 bytes).",
  "error.not_resumable": "This recording cannot be resumed from here.",
  "error.resume_limit": "It was resumed three times already; the owner of this service decides now.",
  "error.not_halted": "It is not stopped any more.",
  "error.unauthorized": "Your session has ended: sign in again.",
  "error.network": "The connection to the server was lost. Try again.",
  "error.other": "The server refused it: {message}",
  "when.inSeconds": "in {n} seconds",
  "when.at": "at {time}",
  // The recording's audio where a browser cannot play the upload, and the way on from over_quota.
  "audio.pending": "The audio will be playable here shortly: it is being converted into a format your browser plays.",
  "audio.pendingHalted": "The audio can be played here once the recording has been prepared: a browser cannot play its format as it was uploaded.",
  "audio.none": "The audio cannot be played here: a browser cannot play its format, and it was prepared before this service made playable copies. The owner of this service can make one.",
  "quota.resumeNow": "There is room for it now: resume it.",
  "quota.resumeAt": "You can resume it from {when}, when your daily amount allows it.",
  "quota.never": "It is longer than your whole daily amount of audio, so it cannot be resumed; the owner of this service can raise the amount.",
};

const ru = {
  "lang.name": "Русский",
  "app.loading": "Загрузка…",
  "signin.title": "Вход",
  "signin.lead": "Войдите, чтобы загружать записи и читать расшифровки.",
  "signin.email": "Электронная почта",
  "signin.password": "Пароль",
  "signin.submit": "Войти",
  "signin.busy": "Входим…",
  "signin.failed": "Неверная почта или пароль.",
  "signin.forgot": "Забыли пароль?",
  "signin.askOwner": "Забыли пароль? Попросите владельца сервиса задать новый.",
  "signout": "Выйти",
  "forgot.title": "Забыли пароль?",
  "forgot.lead": "Введите почту: на неё придёт ссылка, по которой можно задать новый пароль.",
  "forgot.submit": "Отправить ссылку",
  "forgot.busy": "Отправляем…",
  "forgot.sent": "Если есть учётная запись с этой почтой, письмо со ссылкой уже в пути. Проверьте почту.",
  "forgot.back": "Вернуться ко входу",
  "forgot.noMail": "Этот сервис не отправляет писем, поэтому ссылку прислать нельзя. Попросите его владельца задать вам новый пароль (он выполнит transcriber user password с вашей почтой).",
  "reset.title": "Новый пароль",
  "reset.lead": "Выберите новый пароль для своей учётной записи.",
  "reset.submit": "Задать пароль",
  "reset.done": "Новый пароль задан. Войдите с ним.",
  "reset.expired": "Эта ссылка больше не действует. Запросите новую.",
  "reset.again": "Запросить новую ссылку",
  "password.link": "Сменить пароль",
  "password.title": "Смена пароля",
  "password.current": "Текущий пароль",
  "password.new": "Новый пароль",
  "password.repeat": "Новый пароль ещё раз",
  "password.hint": "От {min} до {max} символов. На других устройствах нужно будет войти заново.",
  "password.submit": "Сменить пароль",
  "password.busy": "Сохраняем…",
  "password.cancel": "Отмена",
  "password.done": "Пароль изменён; на других устройствах сеанс завершён.",
  "password.mismatch": "Два новых пароля не совпадают.",
  "upload.title": "Новая запись",
  "upload.drop": "Перетащите сюда аудио- или видеофайлы",
  "upload.or": "или",
  "upload.choose": "Выбрать файлы",
  "upload.record": "Записать голосовую заметку",
  "upload.titleLabel": "Название (необязательно)",
  "upload.titleHint": "Если оставить пустым, запись назовётся по имени файла.",
  "upload.language": "Язык речи",
  "upload.autoLanguage": "Определить автоматически",
  "upload.sending": "Загрузка {percent}%",
  "upload.checking": "Проверяем файл…",
  "upload.sent": "Загружено",
  "upload.dismiss": "Убрать",
  "record.recording": "Идёт запись {time}",
  "record.stop": "Остановить и отправить",
  "record.cancel": "Отменить",
  "record.name": "Голосовая заметка {when}",
  "record.denied": "Микрофон недоступен: разрешите его для этой страницы и попробуйте снова.",
  "record.unsupported": "Этот браузер не умеет записывать звук.",
  "list.title": "Ваши записи",
  "list.empty": "Записей пока нет. Перетащите файл выше или запишите голосовую заметку.",
  "list.range": "{first}–{last} из {total}",
  "list.newer": "Новее",
  "list.older": "Старше",
  "list.untitled": "Запись без названия",
  "list.open": "Открыть",
  "list.live": "Обновляется само",
  "list.offline": "Переподключаемся…",
  "record.back": "Все записи",
  "record.rename": "Переименовать",
  "record.renameLabel": "Новое название",
  "record.save": "Сохранить",
  "record.cancelEdit": "Отмена",
  "record.uploaded": "Загружено {when}",
  "record.resume": "Возобновить",
  "record.resumed": "Возобновлено: запись снова в очереди.",
  "record.notFound": "Такой записи нет.",
  "record.noSpeech": "Речи в этой записи не найдено.",
  "record.progress": "Готово на {percent}%",
  "eta.underMinute": "Осталось меньше минуты",
  "eta.minutes": "Осталась примерно {n} минута|Осталось примерно {n} минуты|Осталось примерно {n} минут",
  "eta.hours": "Остался примерно {n} час|Осталось примерно {n} часа|Осталось примерно {n} часов",
  "record.waitingText": "Расшифровка появится здесь, когда будет готова. Страницу можно закрыть: работа продолжится.",
  "player.label": "Запись",
  "player.retry": "Не удалось загрузить звук.",
  "transcript.title": "Расшифровка",
  "transcript.search": "Поиск по расшифровке",
  "transcript.matches": "Найдено строк: {count}",
  "transcript.noMatches": "Ничего не найдено.",
  "transcript.download": "Скачать",
  "download.word": "Документ Word",
  "download.wordPending": "Документ Word готовится вместе с текстом.",
  "transcript.playFrom": "Воспроизвести с {time}",
  "view.label": "Показать",
  "view.transcript": "Расшифровка",
  "view.text": "Текст",
  "text.title": "Текст",
  "text.pending": "Текст готовится из расшифровки.",
  "text.hint": "Слова расшифровки, разбитые на абзацы, без слов-паразитов и повторов; больше ничего не изменено.",
  "text.empty": "Речи не найдено, поэтому текст пуст.",
  "brief.title": "Коротко",
  "brief.topics": "Темы",
  "brief.hint": "Написано языковой моделью; у каждой фразы есть слова, на которые она опирается. Сверьте их с записью.",
  "brief.none": "Для этой записи нет краткого содержания.",
  "brief.noneWhy.no_speech": "Речь в ней не найдена.",
  "brief.noneWhy.nothing_usable": "Языковая модель не написала ничего, что подтверждает запись.",
  "brief.noneWhy.insights_halted": "Составление остановлено; владелец сервиса видит причину.",
  "activity.queued": "В очереди",
  "activity.normalizing": "Подготовка звука",
  "activity.recognizing": "Распознавание речи",
  "activity.finding_speakers": "Определение говорящих",
  "speaker.numbered": "Говорящий {n}",
  "activity.waiting_for_provider": "В сервисе распознавания",
  "activity.finalizing": "Завершение",
  "activity.done": "Готово",
  "activity.halted": "Остановлено",
  "halt.attempts_exhausted": "Несколько попыток подряд не удались.",
  "halt.stalled": "Обработка слишком долго стояла на месте.",
  "halt.unsupported_media": "Файл не читается как звук. Загрузите другой файл.",
  "halt.too_long": "Запись длиннее, чем принимает этот сервис.",
  "halt.provider_rejected": "Сервис распознавания отказал; нужен владелец этого сервиса.",
  "halt.provider_failed": "Сервис распознавания не справился с записью.",
  "halt.results_expired": "Результат распознавания устарел, прежде чем его забрали.",
  "halt.halted_by_owner": "Владелец сервиса остановил обработку.",
  "halt.unclaimable": "Запись не удалось обработать; нужен владелец этого сервиса.",
  "halt.over_quota": "Обработка остановлена до расшифровки: запись превышает ваш дневной объём аудио (считается звук за последние 24 часа).",
  "halt.unparsable_answer": "Краткое содержание не написано: ответы языковой модели не удалось прочитать.",
  "halt.other": "Обработка остановлена ({code}).",
  "halt.canResume": "Ещё одна попытка может помочь.",
  "error.too_large": "{name} слишком большой: сервис принимает не больше {limit}.",
  "error.not_audio": "{name} — не аудио- и не видеофайл.",
  "error.empty_file": "{name} пустой.",
  "error.unknown_language": "Такого языка нет в списке.",
  "error.title_too_long": "Слишком длинное название: не больше 500 символов.",
  "error.invalid_title": "В названии есть управляющий символ (невидимый или меняющий порядок текста): уберите его.",
  "error.too_many_uploads": "За час загружено столько записей, сколько разрешено. Попробуйте {when}.",
  "error.too_many_waiting": "Слишком много ваших записей ещё обрабатывается. Попробуйте {when}.",
  "error.too_much_audio": "Это превысит ваш дневной объём аудио. Попробуйте {when}.",
  "error.too_many_requests": "Слишком много попыток. Попробуйте {when}.",
  "error.too_many_failed_logins": "Слишком много неверных паролей для этой учётной записи. Попробуйте {when}.",
  "error.wrong_password": "Текущий пароль неверен.",
  "error.weak_password": "Длина нового пароля — от {min} до {max} символов.",
  "error.password_bytes": "Новый пароль занимает {bytes} байт, а допустимо не больше {max_bytes} (буква кириллицы — 2 байта).",
  "error.not_resumable": "Эту запись нельзя возобновить отсюда.",
  "error.resume_limit": "Запись уже возобновляли трижды; теперь решает владелец сервиса.",
  "error.not_halted": "Запись уже не остановлена.",
  "error.unauthorized": "Сеанс закончился: войдите снова.",
  "error.network": "Связь с сервером прервалась. Попробуйте ещё раз.",
  "error.other": "Сервер отказал: {message}",
  "when.inSeconds": "через {n} с",
  "when.at": "в {time}",
  // The recording's audio where a browser cannot play the upload, and the way on from over_quota.
  "audio.pending": "Звук скоро можно будет прослушать здесь: он переводится в формат, который воспроизводит браузер.",
  "audio.pendingHalted": "Звук можно будет прослушать здесь, когда запись подготовят: браузер не воспроизводит её формат в том виде, в каком она загружена.",
  "audio.none": "Звук нельзя прослушать здесь: браузер не воспроизводит его формат, а запись подготовили до того, как сервис начал делать копии для прослушивания. Владелец сервиса может сделать такую копию.",
  "quota.resumeNow": "Теперь для неё есть место: возобновите её.",
  "quota.resumeAt": "Возобновить её можно будет с {when}, когда это позволит дневной объём.",
  "quota.never": "Запись длиннее всего вашего дневного объёма аудио, поэтому её нельзя возобновить; владелец сервиса может увеличить объём.",
};

export const DICTS = { en, ru };

function fromBrowser() {
  for (const tag of navigator.languages || [navigator.language || "en"]) {
    const base = String(tag).toLowerCase().split("-")[0];
    if (base in DICTS) return base;
  }
  return "en";
}

let current = (() => {
  try {
    const kept = localStorage.getItem(KEY);
    if (kept && kept in DICTS) return kept;
  } catch (_) {
    // storage refused (private mode): the browser's language it is
  }
  return fromBrowser();
})();

export function lang() {
  return current;
}

export function setLang(code) {
  current = code in DICTS ? code : "en";
  try {
    localStorage.setItem(KEY, current);
  } catch (_) {
    // not kept: this page still switches
  }
  document.documentElement.lang = current;
}

export function other() {
  return current === "ru" ? "en" : "ru";
}

// The words for `key` in the current language, `{name}` filled from `params`.
export function t(key, params) {
  const words = DICTS[current][key] ?? DICTS.en[key] ?? key;
  return words.replace(/\{(\w+)\}/g, (_, name) => (params && name in params ? String(params[name]) : ""));
}

// The plural categories (Intl.PluralRules) in the order a word's forms are written, split by
// "|": English "one|other", Russian "one|few|many" (минута|минуты|минут). A category with no
// form of its own (Russian "other": fractions) takes the last.
const PLURAL_ORDER = { en: ["one", "other"], ru: ["one", "few", "many"] };

// The words for `key` in the form the count `n` takes, `{n}` filled with it.
export function plural(key, n) {
  const forms = t(key, { n: number(n) }).split("|");
  let category = "other";
  try {
    category = new Intl.PluralRules(current).select(n);
  } catch (_) { /* an engine without it: the last form */ }
  const at = PLURAL_ORDER[current].indexOf(category);
  return forms[at >= 0 && at < forms.length ? at : forms.length - 1];
}

// Languages the service takes whose names Chromium's own data lacks (measured: its
// Intl.DisplayNames gives back the code for these alone, in English and Russian).
const LANGUAGE_NAMES = {
  ba: { en: "Bashkir", ru: "башкирский" },
  bo: { en: "Tibetan", ru: "тибетский" },
};

export function languageName(code) {
  let name = "";
  try {
    name = new Intl.DisplayNames([current], { type: "language" }).of(code) || "";
  } catch (_) { /* an engine without it: the table below, or the code */ }
  if (!name || name === code) name = (LANGUAGE_NAMES[code] || {})[current] || "";
  return name ? name.charAt(0).toLocaleUpperCase(current) + name.slice(1) : code;
}

// A speaker's label in the page's language: the engine's "Speaker 3" translated, a name as it is.
export function speakerLabel(label) {
  const numbered = /^Speaker (\d+)$/.exec(label);
  return numbered ? t("speaker.numbered", { n: numbered[1] }) : label;
}

export function dateTime(iso) {
  if (!iso) return "";
  return new Intl.DateTimeFormat(current, { dateStyle: "medium", timeStyle: "short" }).format(new Date(iso));
}

export function clock(date) {
  return new Intl.DateTimeFormat(current, { hour: "2-digit", minute: "2-digit" }).format(date);
}

export function number(n) {
  return new Intl.NumberFormat(current).format(n);
}

// "in 40 seconds" or "at 14:05" for a wait of `seconds`.
export function when(seconds) {
  if (seconds < 90) return t("when.inSeconds", { n: Math.max(1, Math.round(seconds)) });
  return t("when.at", { time: clock(new Date(Date.now() + seconds * 1000)) });
}

export function bytes(n) {
  const units = current === "ru" ? ["Б", "КБ", "МБ", "ГБ"] : ["B", "KB", "MB", "GB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return number(Math.round(n * 10) / 10) + " " + units[i];
}
