// Directory templates: any root filesystem folder (debootstrap output, an unpacked image) can
// be the read-only base of a sandbox. Here a minimal rootfs is assembled from the host's dash
// and the libraries it needs, imported, and used.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runtime/linux/template_store.h"
#include "support/runtime_fixture.h"

namespace paddock::testing {
namespace {

namespace fs = std::filesystem;

class RuntimeTemplateTest : public SandboxTest {
 protected:
  void SetUp() override {
    SandboxTest::SetUp();
    if (IsSkipped()) return;
    rootfs_ = TestDataDir() + "/mini-rootfs-" + std::to_string(getpid());
    fs::remove_all(rootfs_);
    // dash plus exactly the shared objects ldd reports, at the same paths.
    const std::string script = "set -e; r='" + rootfs_ +
                               "'; mkdir -p \"$r/usr/bin\"; cp /usr/bin/dash \"$r/usr/bin/sh\";"
                               "for lib in $(ldd /usr/bin/dash | grep -o '/[^ ]*'); do"
                               "  mkdir -p \"$r$(dirname $lib)\"; cp -L \"$lib\" \"$r$lib\"; done;"
                               "ln -s usr/bin \"$r/bin\"; echo 'template file' > \"$r/usr/marker\"";
    ASSERT_EQ(std::system(("bash -c \"" + EscapeForDoubleQuotes(script) + "\"").c_str()), 0);
    runtime::linux::TemplateStore store(TestDataDir() + "/templates");
    auto m = store.ImportDirectory(name_, rootfs_);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    digest_ = m->digest;
  }
  void TearDown() override {
    SandboxTest::TearDown();
    if (rootfs_.empty()) return;
    runtime::linux::TemplateStore store(TestDataDir() + "/templates");
    (void)store.Remove(name_);
    fs::remove_all(rootfs_);
  }
  static std::string EscapeForDoubleQuotes(const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\' || c == '$' || c == '`') out += '\\';
      out += c;
    }
    return out;
  }

  std::string rootfs_, digest_;
  const std::string name_ = "mini-" + std::to_string(getpid());
};

TEST_F(RuntimeTemplateTest, SandboxRunsOnADirectoryTemplate) {
  runtime::SandboxSpec spec = DefaultSpec();
  spec.template_name = name_;
  std::string id = NewSandbox(spec);
  ASSERT_FALSE(id.empty());
  auto info = rt().Get(id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->template_name, name_);
  EXPECT_EQ(info->template_digest, digest_);

  // Only the template's files are there: no host /usr (no python3), its own marker file.
  CommandOutput o =
      Sh(id,
         "read l < /usr/marker; echo \"$l\"; "
         "if [ -e /usr/bin/python3 ]; then echo host-usr; else echo no-python; fi; "
         "while read k v rest; do [ \"$k\" = Uid: ] && echo $v; done < /proc/self/status; :");
  EXPECT_EQ(o.result.exit_code, 0) << o.err;
  EXPECT_EQ(o.out, "template file\nno-python\n1000\n");

  // The writable layer sits on top; the template directory itself is never modified.
  o = Sh(id, "echo changed > /usr/marker 2>/dev/null || echo refused; echo new > /home/sandbox/f");
  EXPECT_EQ(o.result.exit_code, 0) << o.err;
  std::ifstream in(rootfs_ + "/usr/marker");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "template file");
  EXPECT_FALSE(fs::exists(rootfs_ + "/home/sandbox/f"));
}

}  // namespace
}  // namespace paddock::testing
