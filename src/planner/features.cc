#include "planner/features.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

// GCC 12 reports false -Wmaybe-uninitialized errors inside <regex>'s automaton (std::function
// members of its states) in the sanitizer build; they point into the header, so they are
// silenced for the header only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <regex>
#pragma GCC diagnostic pop

namespace paddock::planner {

namespace {

// --- tables ------------------------------------------------------------------------------------
// Adding knowledge means adding a row, never a branch.

// How the words after an install command are read as package names.
enum class Ecosystem { kNone, kPython, kConda, kNpm, kApt };

// A command at the start of a shell segment (after "sudo", "run", "$ ", list bullets...).
struct CommandPattern {
  const char* needle;  // a literal the segment must contain (cheap pre-filter)
  const char* regex;   // ECMAScript, matched against the lower-cased segment
  std::vector<const char*> tags;
  Ecosystem packages = Ecosystem::kNone;  // read the rest of the segment as package names
};

// "(?=\s|$)" ends a command word: \b would fail after "g++".
#define END R"((?=\s|$))"
const std::vector<CommandPattern>& CommandPatterns() {
  static const std::vector<CommandPattern> kPatterns = {
      {"pip",
       R"(^(?:python3?\s+-m\s+)?pip3?\s+install)" END,
       {"pm:pip", "lang:python"},
       Ecosystem::kPython},
      {"uv", R"(^uv\s+(?:pip\s+install|add))" END, {"pm:pip", "lang:python"}, Ecosystem::kPython},
      {"poetry", R"(^poetry\s+add)" END, {"pm:pip", "lang:python"}, Ecosystem::kPython},
      {"install",
       R"(^(?:conda|mamba|micromamba)\s+install)" END,
       {"pm:conda", "lang:python"},
       Ecosystem::kConda},
      {"pm",
       R"(^(?:npm|pnpm)\s+(?:install|i|add|ci))" END,
       {"pm:npm", "lang:javascript"},
       Ecosystem::kNpm},
      {"yarn",
       R"(^yarn(?:\s+(?:add|install)(?=\s|$)|\s*$))",
       {"pm:npm", "lang:javascript"},
       Ecosystem::kNpm},
      {"apt", R"(^apt(?:-get)?\s+(?:-\S+\s+)*install)" END, {"pm:apt"}, Ecosystem::kApt},
      {"playwright", R"(^(?:npx\s+)?playwright\s+install)" END, {"pkg:playwright", "cap:browser"}},
      {"cargo",
       R"(^cargo\s+(?:build|test|run|bench|install|check))" END,
       {"build:cargo", "lang:rust", "cap:compile"}},
      {"mvn", R"(^(?:\./)?mvnw?)" END, {"build:maven", "lang:java", "cap:compile"}},
      {"gradle", R"(^(?:\./)?gradlew?)" END, {"build:gradle", "lang:java", "cap:compile"}},
      {"go", R"(^go\s+(?:build|test|install|run|vet))" END, {"build:go", "lang:go", "cap:compile"}},
      // "make" is also an English verb: only flags, VAR=value and the usual targets may
      // follow ("make -j8 install", not "make a poem").
      {"make",
       R"(^make(?:\s+(?:-\S+|[a-z_][a-z0-9_]*=\S*|all|install|test|tests|build|clean|check|release|debug|dist))*\s*$)",
       {"build:make", "cap:compile"}},
      {"cmake", R"(^cmake)" END, {"build:cmake", "cap:compile"}},
      {"c",
       R"(^(?:gcc|g\+\+|clang|clang\+\+|cc|c\+\+)(?:-\d+)?)" END,
       {"build:c", "lang:c", "cap:compile"}},
      {"build",
       R"(^(?:npm|pnpm|yarn)\s+(?:run\s+)?build)" END,
       {"build:node", "lang:javascript", "cap:compile"}},
      {"",
       R"(^(?:tsc|webpack|vite\s+build|next\s+build))" END,
       {"build:node", "lang:javascript", "cap:compile"}},
      {"", R"(^(?:python[23]?(?:\.\d+)?|pytest|ipython|jupyter))" END, {"lang:python"}},
      {"", R"(^(?:node|npx|deno|bun))" END, {"lang:javascript"}},
      {"clone", R"(^git\s+clone)" END, {"vcs:clone"}},
      {"", R"(^(?:curl|wget))" END, {"net:fetch"}},
      {"", R"(^(?:chromium|chromium-browser|google-chrome|firefox))" END, {"cap:browser"}},
      {"nvidia", R"(^nvidia-smi)" END, {"cap:gpu"}},
  };
  return kPatterns;
}
#undef END

// A library or tool, known by any of its names (package names, import names, prose words).
struct Library {
  std::vector<const char*> names;
  std::vector<const char*> tags;
  bool in_prose = true;  // its name alone in prose is evidence (false for common words)
};

const std::vector<Library>& Libraries() {
  static const std::vector<Library> kLibraries = {
      {{"pandas"}, {"pkg:pandas", "cap:dataframe", "lang:python"}},
      {{"numpy"}, {"pkg:numpy", "cap:numeric", "lang:python"}},
      {{"polars"}, {"pkg:polars", "cap:dataframe"}},
      {{"pyarrow"}, {"pkg:pyarrow", "cap:dataframe", "lang:python"}},
      {{"duckdb"}, {"pkg:duckdb", "cap:dataframe"}},
      {{"dask"}, {"pkg:dask", "cap:dataframe", "cap:bigdata", "lang:python"}},
      {{"pyspark"}, {"pkg:pyspark", "cap:dataframe", "cap:bigdata", "lang:python"}},
      {{"scipy"}, {"pkg:scipy", "cap:numeric", "lang:python"}},
      {{"statsmodels"}, {"pkg:statsmodels", "cap:numeric", "lang:python"}},
      {{"scikit-learn", "sklearn"}, {"pkg:scikit-learn", "cap:ml", "lang:python"}},
      {{"xgboost"}, {"pkg:xgboost", "cap:ml"}},
      {{"lightgbm"}, {"pkg:lightgbm", "cap:ml"}},
      {{"matplotlib"}, {"pkg:matplotlib", "cap:plot", "lang:python"}},
      {{"seaborn"}, {"pkg:seaborn", "cap:plot", "lang:python"}},
      {{"plotly"}, {"pkg:plotly", "cap:plot"}},
      {{"torch", "pytorch", "torchvision", "torchaudio"},
       {"pkg:torch", "cap:ml", "cap:deep-learning", "lang:python"}},
      {{"tensorflow", "tensorflow-cpu", "tensorflow-gpu", "keras"},
       {"pkg:tensorflow", "cap:ml", "cap:deep-learning", "lang:python"}},
      {{"jax", "jaxlib", "flax"}, {"pkg:jax", "cap:ml", "cap:deep-learning", "lang:python"}},
      {{"transformers"}, {"pkg:transformers", "cap:ml", "cap:deep-learning", "lang:python"}},
      {{"opencv", "opencv-python", "opencv-python-headless", "cv2"}, {"pkg:opencv", "cap:vision"}},
      {{"pillow", "pil"}, {"pkg:pillow", "cap:image", "lang:python"}, false},
      {{"playwright", "@playwright/test", "playwright-core"}, {"pkg:playwright", "cap:browser"}},
      {{"puppeteer", "puppeteer-core"}, {"pkg:puppeteer", "cap:browser", "lang:javascript"}},
      {{"selenium", "webdriver", "chromedriver"}, {"pkg:selenium", "cap:browser"}},
      {{"chromium", "chromium-browser", "google-chrome", "chrome"},
       {"pkg:chromium", "cap:browser"}},
      {{"cupy", "cuda"}, {"cap:gpu"}},
  };
  return kLibraries;
}

// Words whose presence in prose is a (weaker) hint about the workload.
struct Keyword {
  std::vector<const char*> words;
  std::vector<const char*> tags;
};

const std::vector<Keyword>& Keywords() {
  static const std::vector<Keyword> kKeywords = {
      {{"screenshot", "screenshots", "headless", "browser"}, {"cap:browser"}},
      {{"gpu", "gpus"}, {"cap:gpu"}},
      {{"compile", "compiles", "compiling", "compilation", "build", "rebuild"}, {"hint:build"}},
      {{"csv", "tsv", "parquet", "dataset", "datasets", "dataframe", "xlsx", "jsonl"},
       {"hint:data"}},
      {{"train", "training", "fine-tune", "finetune", "fine-tuning"}, {"hint:training"}},
      {{"scrape", "scraping", "crawl", "crawler"}, {"hint:scraping"}},
      {{"python", "python3"}, {"lang:python"}},
      {{"javascript", "typescript", "nodejs", "node.js"}, {"lang:javascript"}},
      {{"rust"}, {"lang:rust"}},
      {{"golang"}, {"lang:go"}},
  };
  return kKeywords;
}

// Language hints -> the lang:* value. Unknown hints become lang:other.
const std::map<std::string, std::string>& LanguageNames() {
  static const std::map<std::string, std::string> kNames = {
      {"python", "python"},
      {"py", "python"},
      {"python3", "python"},
      {"javascript", "javascript"},
      {"js", "javascript"},
      {"node", "javascript"},
      {"nodejs", "javascript"},
      {"node.js", "javascript"},
      {"typescript", "javascript"},
      {"ts", "javascript"},
      {"deno", "javascript"},
      {"bun", "javascript"},
      {"go", "go"},
      {"golang", "go"},
      {"rust", "rust"},
      {"java", "java"},
      {"kotlin", "java"},
      {"scala", "java"},
      {"c", "c"},
      {"c++", "c"},
      {"cpp", "c"},
      {"cxx", "c"},
      {"ruby", "ruby"},
      {"r", "r"},
      {"shell", "shell"},
      {"bash", "shell"},
      {"sh", "shell"},
  };
  return kNames;
}

// The salient categories: the ones the workload signature is made of.
constexpr std::string_view kSignatureCategories[] = {
    "lang:", "pkg:", "cap:", "build:", "data:", "repo:"};

// Flags of install commands that take a value (the value is not a package), space-delimited.
constexpr std::string_view kFlagsWithValue =
    " -r --requirement -c --constraint -e --editable -i --index-url --extra-index-url -f "
    "--find-links -t --target --prefix --root -n --name -p --registry --channel ";

constexpr size_t kMaxPackages = 200;
constexpr size_t kEvidenceBytes = 80;
constexpr uint64_t kBytesPerRow = 100;  // rough: a row count turns into a data size estimate

// --- helpers -----------------------------------------------------------------------------------

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Lower-cases, collapses each whitespace run to one character (a newline if it held one) and
// breaks words longer than kMaxWordBytes. libstdc++'s regex engine recurses once per character
// a repetition consumes, so this is what keeps every pattern's recursion depth small whatever
// the input: no repeated class in the tables can then span more than one word.
constexpr size_t kMaxWordBytes = 256;
std::string Normalise(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t word = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (std::isspace(c)) {
      bool newline = false;
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) {
        newline = newline || s[i] == '\n';
        ++i;
      }
      --i;
      out.push_back(newline ? '\n' : ' ');
      word = 0;
      continue;
    }
    if (++word > kMaxWordBytes) {
      out.push_back(' ');
      word = 1;
    }
    out.push_back(static_cast<char>(std::tolower(c)));
  }
  return out;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

const Library* FindLibrary(std::string_view name) {
  static const std::map<std::string, const Library*> kByName = [] {
    std::map<std::string, const Library*> m;
    for (const Library& lib : Libraries()) {
      for (const char* n : lib.names) m.emplace(n, &lib);
    }
    return m;
  }();
  auto it = kByName.find(std::string(name));
  return it == kByName.end() ? nullptr : it->second;
}

const Keyword* FindKeyword(std::string_view word) {
  static const std::map<std::string, const Keyword*> kByWord = [] {
    std::map<std::string, const Keyword*> m;
    for (const Keyword& k : Keywords()) {
      for (const char* w : k.words) m.emplace(w, &k);
    }
    return m;
  }();
  auto it = kByWord.find(std::string(word));
  return it == kByWord.end() ? nullptr : it->second;
}

class Extractor {
 public:
  explicit Extractor(WorkloadFeatures* out) : f_(out) {}

  void Tag(const std::string& tag, std::string_view because) {
    if (f_->tags.insert(tag).second)
      f_->evidence.emplace(tag, BoundedQuote(because, kEvidenceBytes));
  }
  void Tags(const std::vector<const char*>& tags, std::string_view because) {
    for (const char* t : tags) Tag(t, because);
  }

  void Package(const std::string& name, std::string_view because) {
    if (name.empty() || packages_.size() >= kMaxPackages) return;
    packages_.insert(name);
    if (const Library* lib = FindLibrary(name)) Tags(lib->tags, because);
  }

  void Data(uint64_t bytes, std::string_view because) {
    if (bytes > f_->data_bytes) {
      f_->data_bytes = bytes;
      data_evidence_ = BoundedQuote(because, kEvidenceBytes);
    }
  }

  // One source text (the task, a step or a command), already lower-cased.
  void Text(const std::string& text) {
    // Most specific first: the first source of a tag is the evidence quoted in reasons.
    Imports(text);
    for (const std::string& segment : Segments(text)) Command(segment);
    Sizes(text);
    Rows(text);
    Words(text);
  }

  void Finish() {
    f_->packages.assign(packages_.begin(), packages_.end());
    if (f_->data_bytes > 0) {
      const char* tier = f_->data_bytes >= kDataHugeBytes     ? "data:huge"
                         : f_->data_bytes >= kDataLargeBytes  ? "data:large"
                         : f_->data_bytes >= kDataMediumBytes ? "data:medium"
                                                              : "data:small";
      Tag(tier, data_evidence_);
    }
    auto [key, signature] = WorkloadSignature(f_->tags);
    f_->signature_key = std::move(key);
    f_->signature = std::move(signature);
  }

 private:
  // Prose: library names and keywords, token by token.
  void Words(const std::string& text) {
    size_t i = 0;
    while (i < text.size()) {
      auto word_char = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '+';
      };
      while (i < text.size() && !word_char(text[i])) ++i;
      size_t start = i;
      while (i < text.size() && word_char(text[i])) ++i;
      if (i == start) continue;
      std::string_view word(text.data() + start, i - start);
      while (!word.empty() && (word.back() == '-' || word.back() == '+')) word.remove_suffix(1);
      if (word.empty()) continue;
      if (const Library* lib = FindLibrary(word); lib && lib->in_prose) Tags(lib->tags, word);
      if (const Keyword* k = FindKeyword(word)) Tags(k->tags, word);
    }
  }

  // Python imports in inline code (python -c, heredocs, pasted snippets).
  void Imports(const std::string& text) {
    if (text.find("import") == std::string::npos) return;
    static const std::regex kImport(
        R"((?:^|[\s;('"])(?:from\s+([a-z_][a-z0-9_]*)[a-z0-9_.]*\s+import|import\s+([a-z_][a-z0-9_]*(?:\s*,\s*[a-z_][a-z0-9_]*)*)))");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kImport);
         it != std::sregex_iterator(); ++it) {
      std::string modules = (*it)[1].matched ? (*it)[1].str() : (*it)[2].str();
      size_t pos = 0;
      while (pos <= modules.size()) {
        size_t comma = modules.find(',', pos);
        std::string module = Trim(modules.substr(pos, comma - pos));
        if (const Library* lib = FindLibrary(module)) Tags(lib->tags, it->str());
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    }
  }

  // Explicit sizes with units: "20gb.csv", "a 500 mb file", "1.5 gib". Sizes that describe
  // memory ("8gb of ram", "memory 4gb") are not data.
  void Sizes(const std::string& text) {
    static const std::regex kSize(
        R"((\d+(?:\.\d+)?)\s?(kib|kb|mib|mb|gib|gb|tib|tb|kilobytes?|megabytes?|gigabytes?|terabytes?)(?![a-z]))");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kSize);
         it != std::sregex_iterator(); ++it) {
      size_t end = static_cast<size_t>(it->position() + it->length());
      size_t begin = static_cast<size_t>(it->position());
      std::string after = text.substr(end, 24);
      std::string before = text.substr(begin >= 24 ? begin - 24 : 0, std::min<size_t>(begin, 24));
      static const std::regex kMemoryAfter(R"(^\s*(?:of\s+)?(?:ram|memory|mem)\b)");
      static const std::regex kMemoryBefore(
          R"((?:ram|memory|mem)(?:\s*(?:to|of|limit|is|at|=|:))*\s*$)");
      if (std::regex_search(after, kMemoryAfter) || std::regex_search(before, kMemoryBefore)) {
        continue;
      }
      double value = std::strtod((*it)[1].str().c_str(), nullptr);
      char unit = (*it)[2].str()[0];
      double mult = unit == 'k'   ? 1024.0
                    : unit == 'm' ? 1024.0 * 1024
                    : unit == 'g' ? 1024.0 * 1024 * 1024
                                  : 1024.0 * 1024 * 1024 * 1024;
      double bytes = value * mult;
      if (std::isfinite(bytes) && bytes < 1e18) Data(static_cast<uint64_t>(bytes), it->str());
    }
  }

  // Row counts ("10 million rows", "--rows 10000000"): an estimate at kBytesPerRow.
  void Rows(const std::string& text) {
    if (text.find("row") == std::string::npos && text.find("record") == std::string::npos &&
        text.find("line") == std::string::npos) {
      return;
    }
    static const std::regex kCount(
        R"((\d[\d,_]*(?:\.\d+)?)\s*(k|thousand|m|mm|million|b|bn|billion)?\s+(?:rows|records|lines)\b)");
    static const std::regex kFlag(R"(--(?:rows|n-rows|num-rows|nrows|records)[=\s]+(\d[\d,_]*))");
    auto add = [&](const std::string& digits, const std::string& scale, const std::string& what) {
      std::string clean;
      for (char c : digits) {
        if (c != ',' && c != '_') clean.push_back(c);
      }
      double rows = std::strtod(clean.c_str(), nullptr);
      if (scale == "k" || scale == "thousand") rows *= 1e3;
      if (scale == "m" || scale == "mm" || scale == "million") rows *= 1e6;
      if (scale == "b" || scale == "bn" || scale == "billion") rows *= 1e9;
      double bytes = rows * kBytesPerRow;
      if (std::isfinite(bytes) && bytes < 1e18) {
        Data(static_cast<uint64_t>(bytes), what + " (~100 B/row)");
      }
    };
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kCount);
         it != std::sregex_iterator(); ++it) {
      add((*it)[1].str(), (*it)[2].str(), it->str());
    }
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kFlag);
         it != std::sregex_iterator(); ++it) {
      add((*it)[1].str(), "", it->str());
    }
  }

  // Shell-ish segments: lines, backtick spans and pieces between && || ; |, with leading
  // bullets, "$ ", sudo, VAR=value and filler words ("run", "then") removed.
  static std::vector<std::string> Segments(const std::string& text) {
    std::vector<std::string> out;
    std::string current;
    auto flush = [&] {
      std::string s = Clean(current);
      if (!s.empty()) out.push_back(std::move(s));
      current.clear();
    };
    for (size_t i = 0; i < text.size(); ++i) {
      char c = text[i];
      if (c == '\n' || c == '`' || c == ';' || c == '|' ||
          (c == '&' && i + 1 < text.size() && text[i + 1] == '&')) {
        flush();
        if (c == '&') ++i;
        continue;
      }
      current.push_back(c);
    }
    flush();
    return out;
  }

  static std::string Clean(const std::string& raw) {
    static const std::regex kPrefix(
        R"(^\s*(?:(?:[-*>]|\d+[.)]|\$|#|sudo|(?:run|then|and|please|execute|first|next|finally|now)(?=\s)|[a-z_][a-z0-9_]*=\S*)\s*)+)");
    std::string s = raw.size() > kMaxItemBytes ? raw.substr(0, kMaxItemBytes) : raw;
    return Trim(std::regex_replace(s, kPrefix, "", std::regex_constants::format_first_only));
  }

  void Command(const std::string& segment) {
    static const std::vector<std::regex> kCompiled = [] {
      std::vector<std::regex> v;
      for (const CommandPattern& p : CommandPatterns()) v.emplace_back(p.regex);
      return v;
    }();
    for (size_t k = 0; k < CommandPatterns().size(); ++k) {
      const CommandPattern& p = CommandPatterns()[k];
      if (*p.needle && segment.find(p.needle) == std::string::npos) continue;
      std::smatch m;
      if (!std::regex_search(segment, m, kCompiled[k])) continue;
      Tags(p.tags, segment);
      if (p.packages != Ecosystem::kNone) {
        InstallArguments(segment.substr(static_cast<size_t>(m.length(0))), p.packages, segment);
      }
    }
  }

  void InstallArguments(const std::string& rest, Ecosystem eco, const std::string& segment) {
    std::vector<std::string> words;
    size_t i = 0;
    while (i < rest.size()) {
      while (i < rest.size() && std::isspace(static_cast<unsigned char>(rest[i]))) ++i;
      size_t start = i;
      while (i < rest.size() && !std::isspace(static_cast<unsigned char>(rest[i]))) ++i;
      if (i > start) words.push_back(rest.substr(start, i - start));
    }
    for (size_t k = 0; k < words.size(); ++k) {
      std::string w = words[k];
      if (w[0] == '>' || w[0] == '<' || w[0] == '#' ||
          (w[0] == '2' && w.size() > 1 && w[1] == '>')) {
        break;  // redirection or comment: the command's arguments end
      }
      if (w[0] == '-') {
        bool takes_value = kFlagsWithValue.find(" " + w + " ") != std::string_view::npos;
        if (takes_value) ++k;
        continue;
      }
      w.erase(std::remove_if(w.begin(), w.end(), [](char c) { return c == '"' || c == '\''; }),
              w.end());
      std::string name = NormalisePackage(w, eco);
      if (!name.empty()) Package(name, segment);
    }
  }

  static std::string NormalisePackage(const std::string& word, Ecosystem eco) {
    if (word.empty() || word[0] == '.' || word.find("://") != std::string::npos) return "";
    std::string w = word;
    switch (eco) {
      case Ecosystem::kPython: {
        if (w.find('/') != std::string::npos) return "";  // a path or VCS URL
        w = w.substr(0, w.find_first_of("[=<>!~;@ "));
        std::replace(w.begin(), w.end(), '_', '-');
        break;
      }
      case Ecosystem::kConda:
        if (w.find("::") != std::string::npos) w = w.substr(w.find("::") + 2);
        w = w.substr(0, w.find_first_of("=<>!"));
        break;
      case Ecosystem::kNpm:
        if (w[0] == '@') {
          size_t at = w.find('@', 1);
          w = w.substr(0, at);
        } else {
          if (w.find('/') != std::string::npos) return "";
          w = w.substr(0, w.find('@'));
        }
        break;
      case Ecosystem::kApt:
        w = w.substr(0, w.find_first_of("=:"));
        break;
      case Ecosystem::kNone:
        break;
    }
    static const std::regex kName(R"(^[a-z0-9@][a-z0-9._/+-]{0,127}$)");
    if (!std::regex_match(w, kName)) return "";
    return w;
  }

  WorkloadFeatures* f_;
  std::set<std::string> packages_;
  std::string data_evidence_;
};

std::string SizeText(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return fmt::format("{:.1f} GiB", bytes / double(1ull << 30));
  return fmt::format("{} MiB", bytes >> 20);
}

}  // namespace

std::pair<std::string, std::string> WorkloadSignature(const std::set<std::string>& tags) {
  std::string key;
  for (const std::string& tag : tags) {
    bool salient = std::any_of(std::begin(kSignatureCategories), std::end(kSignatureCategories),
                               [&](std::string_view c) { return tag.starts_with(c); });
    if (!salient) continue;
    if (!key.empty()) key += ',';
    key += tag;
  }
  return {key, "ws-" + Sha256Hex(key).substr(0, 16)};
}

std::string CommandSignature(const PlanRequest& request) {
  std::string key;
  for (const std::string& command : request.commands) {
    std::string normalised;
    bool pending_space = false;
    for (char c : command) {
      if (std::isspace(static_cast<unsigned char>(c))) {
        pending_space = !normalised.empty();
        continue;
      }
      if (pending_space) normalised += ' ';
      pending_space = false;
      normalised += c;
    }
    if (normalised.empty()) continue;
    key += normalised;
    key += '\n';  // commands cannot contain a separator that survives normalisation
  }
  if (key.empty()) return "";
  return "wc-" + Sha256Hex(key).substr(0, 16);
}

WorkloadFeatures ExtractFeatures(const PlanRequest& request) {
  WorkloadFeatures f;
  f.command_signature = CommandSignature(request);
  Extractor x(&f);

  // Free text, in order, within the analysis budget.
  size_t budget = kMaxAnalysedBytes;
  auto text = [&](const std::string& t) {
    if (budget == 0) {
      f.truncated = f.truncated || !t.empty();
      return;
    }
    if (t.size() > budget) f.truncated = true;
    std::string_view part = std::string_view(t).substr(0, budget);
    budget -= part.size();
    x.Text(Normalise(part));
  };
  text(request.task);
  for (const std::string& s : request.plan_steps) text(s);
  for (const std::string& c : request.commands) text(c);

  // Declared fields.
  for (const std::string& lang : request.languages) {
    std::string l = Lower(Trim(lang));
    if (l.empty()) continue;
    auto it = LanguageNames().find(l);
    x.Tag("lang:" + (it == LanguageNames().end() ? std::string("other") : it->second),
          "languages: " + lang);
  }
  for (const std::string& dep : request.dependencies) {
    std::string d = Lower(Trim(dep));
    std::replace(d.begin(), d.end(), '_', '-');
    if (!d.empty()) x.Package(d, "dependencies: " + dep);
  }
  if (request.needs_browser) x.Tag("cap:browser", "needs_browser");
  if (request.needs_compile) x.Tag("cap:compile", "needs_compile");
  if (request.needs_gpu) x.Tag("cap:gpu", "needs_gpu");
  if (request.repo_size_bytes) {
    uint64_t r = *request.repo_size_bytes;
    if (r >= (1ull << 30)) {
      x.Tag("repo:large", "repo_size_bytes " + SizeText(r));
    } else if (r >= (100ull << 20)) {
      x.Tag("repo:medium", "repo_size_bytes " + SizeText(r));
    }
  }
  if (request.workspace_bytes && *request.workspace_bytes >= (10ull << 30)) {
    x.Tag("workspace:large", "workspace_bytes " + SizeText(*request.workspace_bytes));
  }
  if (request.expected_duration_seconds && *request.expected_duration_seconds >= 3600) {
    x.Tag("duration:long",
          "expected_duration_seconds " + std::to_string(*request.expected_duration_seconds));
  }
  if (!request.network.empty()) x.Tag("net:" + request.network, "network");
  if (!request.risk_level.empty()) x.Tag("risk:" + request.risk_level, "risk_level");

  x.Finish();
  return f;
}

const std::set<std::string>& KnownTags() {
  static const std::set<std::string> kTags = [] {
    std::set<std::string> t;
    for (const CommandPattern& p : CommandPatterns()) t.insert(p.tags.begin(), p.tags.end());
    for (const Library& l : Libraries()) t.insert(l.tags.begin(), l.tags.end());
    for (const Keyword& k : Keywords()) t.insert(k.tags.begin(), k.tags.end());
    for (const auto& [hint, lang] : LanguageNames()) t.insert("lang:" + lang);
    for (const char* extra :
         {"lang:other", "cap:browser", "cap:compile", "cap:gpu", "data:small", "data:medium",
          "data:large", "data:huge", "repo:medium", "repo:large", "workspace:large",
          "duration:long", "risk:low", "risk:medium", "risk:high"}) {
      t.insert(extra);
    }
    for (std::string_view n : kNetworkProfiles) t.insert("net:" + std::string(n));
    return t;
  }();
  return kTags;
}

}  // namespace paddock::planner
