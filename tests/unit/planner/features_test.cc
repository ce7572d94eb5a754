#include "planner/features.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "planner_test_support.h"

namespace paddock::planner {
namespace {

using testing::Task;

std::string Tags(const WorkloadFeatures& f) {
  std::string out;
  for (const std::string& t : f.tags) out += (out.empty() ? "" : " ") + t;
  return out;
}

TEST(FeatureExtractionTest, PrintHelloHasNoSalientTags) {
  WorkloadFeatures f = ExtractFeatures(Task("print hello world"));
  EXPECT_EQ(f.signature_key, "") << Tags(f);
  EXPECT_EQ(f.data_bytes, 0u);
  EXPECT_TRUE(f.signature.starts_with("ws-"));
  EXPECT_EQ(f.signature.size(), 3u + 16u);
}

TEST(FeatureExtractionTest, PandasOverTwentyGigabyteCsv) {
  WorkloadFeatures f = ExtractFeatures(
      Task("import pandas\ndf = pd.read_csv(\"20GB.csv\")\nprint(df.groupby('k').sum())"));
  EXPECT_TRUE(f.Has("pkg:pandas")) << Tags(f);
  EXPECT_TRUE(f.Has("cap:dataframe"));
  EXPECT_TRUE(f.Has("lang:python"));
  EXPECT_TRUE(f.Has("data:huge"));
  EXPECT_EQ(f.data_bytes, 20ull << 30);
  EXPECT_EQ(f.evidence.at("pkg:pandas"), "import pandas");
}

TEST(FeatureExtractionTest, DifferentWorkloadsGetDifferentSignatures) {
  WorkloadFeatures hello = ExtractFeatures(Task("print hello"));
  WorkloadFeatures pandas = ExtractFeatures(Task("use pandas to summarise sales_20GB.csv"));
  WorkloadFeatures small_pandas = ExtractFeatures(Task("use pandas to summarise a 5 MB csv"));
  EXPECT_NE(hello.signature, pandas.signature);
  EXPECT_NE(pandas.signature, small_pandas.signature);  // data tier is salient
}

TEST(FeatureExtractionTest, RewordingKeepsTheSignature) {
  WorkloadFeatures a = ExtractFeatures(Task("Use pandas to analyse the 20GB.csv file"));
  WorkloadFeatures b = ExtractFeatures(
      Task("Load a 20 GB CSV with pandas and compute the average per region, then plot nothing"));
  WorkloadFeatures c = ExtractFeatures(
      Task("analysis job", {"pip install pandas", "python analyse.py --input data_20gb.csv"}));
  EXPECT_EQ(a.signature_key, "cap:dataframe,data:huge,lang:python,pkg:pandas");
  EXPECT_EQ(a.signature, b.signature) << b.signature_key;
  EXPECT_EQ(a.signature, c.signature) << c.signature_key;
  // The package manager is not salient: pip vs a declared dependency is the same workload.
  EXPECT_TRUE(c.Has("pm:pip"));
}

TEST(FeatureExtractionTest, CommandSignatureIsTheExactCommandsUpToWhitespace) {
  PlanRequest a = Task("make a dict", {"python3 -c 'd = {i: i for i in range(5_000_000)}'"});
  PlanRequest spaced = Task("build a big mapping", {"  python3   -c\t'd = {i: i for i in "
                                                    "range(5_000_000)}'  ",
                                                    "   "});
  PlanRequest hello = Task("make a dict", {"python3 -c 'print(1)'"});
  EXPECT_EQ(CommandSignature(a).substr(0, 3), "wc-");
  EXPECT_EQ(CommandSignature(a).size(), 19u);
  // Whitespace, empty commands and the prose do not matter; the commands do.
  EXPECT_EQ(CommandSignature(a), CommandSignature(spaced));
  EXPECT_NE(CommandSignature(a), CommandSignature(hello));
  // Both are plain Python: one workload signature, two command signatures.
  EXPECT_EQ(ExtractFeatures(a).signature, ExtractFeatures(hello).signature);
  EXPECT_EQ(ExtractFeatures(a).command_signature, CommandSignature(a));
  // Order matters (a different program), and so does where one command ends.
  EXPECT_NE(CommandSignature(Task("", {"make", "make test"})),
            CommandSignature(Task("", {"make test", "make"})));
  EXPECT_NE(CommandSignature(Task("", {"make test"})),
            CommandSignature(Task("", {"make", "test"})));
  // No commands: no exact signature (prose alone is not "the same run").
  EXPECT_EQ(CommandSignature(Task("print hello")), "");
  EXPECT_EQ(CommandSignature(Task("print hello", {" ", ""})), "");
}

TEST(FeatureExtractionTest, SeedBrowserBuildPlan) {
  PlanRequest r = Task("screenshot the frontend", {},
                       {"1. clone repo", "2. npm install", "3. install playwright",
                        "4. build frontend", "5. run chromium", "6. capture screenshot"});
  WorkloadFeatures f = ExtractFeatures(r);
  EXPECT_TRUE(f.Has("cap:browser")) << Tags(f);
  EXPECT_TRUE(f.Has("pkg:playwright"));
  EXPECT_TRUE(f.Has("pm:npm"));
  EXPECT_TRUE(f.Has("lang:javascript"));
  EXPECT_TRUE(f.Has("hint:build"));
}

TEST(FeatureExtractionTest, InstallCommandsYieldPackages) {
  WorkloadFeatures f = ExtractFeatures(Task(
      "", {"sudo apt-get install -y build-essential libpq-dev=14.1 chromium",
           "pip install -r requirements.txt 'scikit-learn>=1.3' numpy==1.26 torch[cuda] ./local",
           "npm i --save-dev @playwright/test@1.40 left-pad", "conda install -c conda-forge polars",
           "uv pip install Polars_Extras"}));
  std::vector<std::string> want = {
      "@playwright/test", "build-essential", "chromium",     "left-pad", "libpq-dev", "numpy",
      "polars",           "polars-extras",   "scikit-learn", "torch"};
  EXPECT_EQ(f.packages, want);
  for (const char* tag :
       {"pm:apt", "pm:pip", "pm:npm", "pm:conda", "pkg:scikit-learn", "cap:ml", "pkg:torch",
        "cap:deep-learning", "pkg:playwright", "cap:browser", "pkg:polars", "pkg:numpy"}) {
    EXPECT_TRUE(f.Has(tag)) << tag << " in " << Tags(f);
  }
  // requirements.txt is a -r value, not a package; ./local is a path.
  EXPECT_EQ(std::count(f.packages.begin(), f.packages.end(), "requirements.txt"), 0);
}

struct BuildCase {
  const char* command;
  const char* tag;
};

TEST(FeatureExtractionTest, BuildToolsAreRecognisedInCommandPosition) {
  const BuildCase cases[] = {
      {"cargo build --release", "build:cargo"},
      {"mvn -B package", "build:maven"},
      {"./gradlew assemble", "build:gradle"},
      {"go build ./...", "build:go"},
      {"make -j8", "build:make"},
      {"cmake -S . -B build", "build:cmake"},
      {"g++ -O2 main.cc -o main", "build:c"},
      {"clang -c x.c", "build:c"},
      {"npm run build", "build:node"},
      {"cd web && pnpm build", "build:node"},
      {"$ sudo make install", "build:make"},
      {"Run `cargo test` in the repo", "build:cargo"},
  };
  for (const BuildCase& c : cases) {
    WorkloadFeatures f = ExtractFeatures(Task("", {c.command}));
    EXPECT_TRUE(f.Has(c.tag)) << c.command << " -> " << Tags(f);
    EXPECT_TRUE(f.Has("cap:compile")) << c.command;
  }
}

TEST(FeatureExtractionTest, CommonWordsInProseAreNotBuildTools) {
  WorkloadFeatures f =
      ExtractFeatures(Task("make a short poem about go and cargo ships; print it with cc in it"));
  EXPECT_FALSE(f.Has("cap:compile")) << Tags(f);
  EXPECT_FALSE(f.Has("build:make"));
  EXPECT_FALSE(f.Has("build:go"));
}

TEST(FeatureExtractionTest, PythonImportsInInlineCodeAndHeredocs) {
  WorkloadFeatures inline_code =
      ExtractFeatures(Task("", {"python -c \"import numpy as np, cv2; print(np.zeros(3))\""}));
  EXPECT_TRUE(inline_code.Has("pkg:numpy")) << Tags(inline_code);
  EXPECT_TRUE(inline_code.Has("pkg:opencv"));
  EXPECT_TRUE(inline_code.Has("cap:vision"));

  WorkloadFeatures heredoc = ExtractFeatures(
      Task("", {"python3 - <<'EOF'\nfrom sklearn.linear_model import Ridge\nimport torch\nEOF"}));
  EXPECT_TRUE(heredoc.Has("pkg:scikit-learn")) << Tags(heredoc);
  EXPECT_TRUE(heredoc.Has("pkg:torch"));
  // "import the data" is prose: no library called "the".
  WorkloadFeatures prose = ExtractFeatures(Task("import the data and print it"));
  EXPECT_EQ(prose.signature_key, "") << Tags(prose);
}

TEST(FeatureExtractionTest, DataSizesWithUnits) {
  struct Case {
    const char* text;
    uint64_t bytes;
  };
  const Case cases[] = {
      {"read a 500 MB file", 500ull << 20},    {"process 1.5 GiB of logs", (3ull << 30) / 2},
      {"dedupe logs_2TB.parquet", 2ull << 40}, {"copy 300 megabytes", 300ull << 20},
      {"a 10 kb json", 10ull << 10},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ExtractFeatures(Task(c.text)).data_bytes, c.bytes) << c.text;
  }
  // The largest size wins.
  EXPECT_EQ(ExtractFeatures(Task("join a 2GB.csv with a 20 MB one")).data_bytes, 2ull << 30);
}

TEST(FeatureExtractionTest, MemorySizesAndDurationsAreNotData) {
  EXPECT_EQ(ExtractFeatures(Task("this needs 8GB of RAM")).data_bytes, 0u);
  EXPECT_EQ(ExtractFeatures(Task("set memory to 4 GB please")).data_bytes, 0u);
  EXPECT_EQ(ExtractFeatures(Task("wait 40m then retry 5m later")).data_bytes, 0u);
}

TEST(FeatureExtractionTest, RowCountsEstimateData) {
  WorkloadFeatures flag = ExtractFeatures(Task("", {"python gen.py --rows 10000000"}));
  EXPECT_EQ(flag.data_bytes, 10'000'000ull * 100);
  EXPECT_TRUE(flag.Has("data:medium")) << Tags(flag);
  WorkloadFeatures words = ExtractFeatures(Task("aggregate 50 million rows of sales"));
  EXPECT_EQ(words.data_bytes, 50'000'000ull * 100);
  EXPECT_TRUE(words.Has("data:large")) << Tags(words);
}

TEST(FeatureExtractionTest, DeclaredFieldsBecomeTags) {
  PlanRequest r;
  r.languages = {"TypeScript", "klingon"};
  r.dependencies = {"Pandas", "scikit_learn"};
  r.needs_browser = true;
  r.needs_gpu = true;
  r.needs_compile = true;
  r.repo_size_bytes = 3ull << 30;
  r.workspace_bytes = 20ull << 30;
  r.expected_duration_seconds = 7200;
  r.network = "web";
  r.risk_level = "high";
  WorkloadFeatures f = ExtractFeatures(r);
  for (const char* tag :
       {"lang:javascript", "lang:other", "pkg:pandas", "pkg:scikit-learn", "cap:browser", "cap:gpu",
        "cap:compile", "repo:large", "workspace:large", "duration:long", "net:web", "risk:high"}) {
    EXPECT_TRUE(f.Has(tag)) << tag << " in " << Tags(f);
  }
  EXPECT_EQ(f.evidence.at("cap:gpu"), "needs_gpu");
}

TEST(FeatureExtractionTest, BrowserWordsAndTools) {
  for (const char* text : {"take a screenshot of example.com", "scrape it with puppeteer",
                           "selenium webdriver login test", "run headless chrome"}) {
    EXPECT_TRUE(ExtractFeatures(Task(text)).Has("cap:browser")) << text;
  }
  EXPECT_TRUE(ExtractFeatures(Task("", {"npx playwright install --with-deps chromium"}))
                  .Has("pkg:playwright"));
}

TEST(FeatureExtractionTest, EveryProducedTagIsKnown) {
  PlanRequest r =
      Task("train a torch model on 3GB of images with a GPU, scrape pages, plot with seaborn",
           {"git clone x", "curl -O y", "pip install pandas", "cargo build", "nvidia-smi"});
  r.languages = {"python", "weird"};
  r.network = "package-registries";
  WorkloadFeatures f = ExtractFeatures(r);
  for (const std::string& t : f.tags) EXPECT_TRUE(KnownTags().count(t)) << t;
  EXPECT_GT(f.tags.size(), 10u);
}

TEST(FeatureExtractionTest, HostileInputIsBoundedAndDeterministic) {
  // Long runs that would make a backtracking regex recurse deeply, and more text than is read.
  PlanRequest r;
  r.task = "import" + std::string(60'000, ' ') + "pandas " + std::string(4'000, '9') + "GB";
  for (int i = 0; i < 200; ++i) r.commands.push_back(std::string(8 * 1024, i % 2 ? 'a' : ' '));
  WorkloadFeatures a = ExtractFeatures(r);
  WorkloadFeatures b = ExtractFeatures(r);
  EXPECT_TRUE(a.truncated);
  EXPECT_EQ(a.signature, b.signature);
  EXPECT_EQ(a.tags, b.tags);
}

TEST(FeatureExtractionTest, WorkloadSignatureIgnoresIncidentalTags) {
  auto [k1, s1] = WorkloadSignature({"lang:python", "pkg:numpy", "pm:pip", "vcs:clone"});
  auto [k2, s2] = WorkloadSignature({"lang:python", "pkg:numpy", "pm:conda", "net:web"});
  EXPECT_EQ(k1, "lang:python,pkg:numpy");
  EXPECT_EQ(s1, s2);
  EXPECT_NE(s1, WorkloadSignature({"lang:python"}).second);
}

}  // namespace
}  // namespace paddock::planner
