// The Runtime file API on a live sandbox, checked against what commands inside see: ownership,
// content, directory operations, read-only areas, the disk cap and root-only files.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "integration/integration_helpers.h"
#include "support/runtime_fixture.h"

namespace paddock::testing {
namespace {

using namespace std::chrono_literals;
using runtime::FileStat;

using RuntimeFilesTest = SandboxTest;

TEST_F(RuntimeFilesTest, WrittenFileIsSeenInsideOwnedByTheSandboxUser) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  Status st = WriteString(rt(), id, "/home/sandbox/hello.txt", "hi there\nline 2\n", 0640);
  ASSERT_TRUE(st.ok()) << st.ToString();
  CommandOutput o =
      Sh(id, "cat /home/sandbox/hello.txt; stat -c '%u %g %a' /home/sandbox/hello.txt");
  EXPECT_EQ(o.out, "hi there\nline 2\n1000 1000 640\n");
  // The sandbox user can modify it.
  o = Sh(id, "echo more >> /home/sandbox/hello.txt && tail -n1 /home/sandbox/hello.txt");
  EXPECT_EQ(o.out, "more\n");

  // Overwrite replaces the whole content; a chunked source is concatenated.
  std::vector<std::string> chunks = {"a", "bc", std::string(100000, 'd'), ""};
  size_t next = 0;
  st = rt().WriteFile(id, "/home/sandbox/hello.txt", 0644, 1 << 20,
                      [&]() -> Result<std::string> { return chunks[next++]; });
  ASSERT_TRUE(st.ok()) << st.ToString();
  o = Sh(id, "wc -c < /home/sandbox/hello.txt; head -c 3 /home/sandbox/hello.txt");
  EXPECT_EQ(o.out, "100003\nabc");

  // Relative paths are taken from the sandbox root.
  ASSERT_TRUE(WriteString(rt(), id, "workspace/rel.txt", "rel").ok());
  EXPECT_EQ(Sh(id, "cat /workspace/rel.txt").out, "rel");
}

TEST_F(RuntimeFilesTest, FileCreatedInsideIsReadable) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  CommandOutput o = Sh(id,
                       "printf 'abc\\n' > /home/sandbox/out.txt; head -c 300000 /dev/urandom | "
                       "base64 > /tmp/big.txt; md5sum < /tmp/big.txt");
  ASSERT_EQ(o.result.exit_code, 0);
  auto text = ReadString(rt(), id, "/home/sandbox/out.txt");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "abc\n");

  // A multi-chunk file arrives intact (compare sizes and a checksum computed inside).
  auto big = ReadString(rt(), id, "/tmp/big.txt");
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  auto size = Sh(id, "wc -c < /tmp/big.txt");
  EXPECT_EQ(std::to_string(big->size()) + "\n", size.out);
  ASSERT_TRUE(WriteString(rt(), id, "/tmp/copy.txt", *big).ok());
  EXPECT_EQ(Sh(id, "md5sum < /tmp/copy.txt").out, o.out);

  auto limited = ReadString(rt(), id, "/tmp/big.txt", 1000);
  ASSERT_FALSE(limited.ok());
  EXPECT_EQ(limited.status().code(), StatusCode::kResourceExhausted);

  auto missing = ReadString(rt(), id, "/home/sandbox/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  auto dir = ReadString(rt(), id, "/home/sandbox");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);

  // The sandbox's own view of the world, not the host's: /etc/hostname is the sandbox id.
  auto hostname = ReadString(rt(), id, "/etc/hostname");
  ASSERT_TRUE(hostname.ok());
  EXPECT_EQ(*hostname, id + "\n");
}

TEST_F(RuntimeFilesTest, SymlinksResolveInsideTheSandboxRoot) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(
      Sh(id,
         "ln -s / /home/sandbox/rootlink && ln -s ../../../../../../etc/hostname /home/sandbox/up")
          .result.exit_code,
      0);
  auto via_root = ReadString(rt(), id, "/home/sandbox/rootlink/etc/hostname");
  ASSERT_TRUE(via_root.ok()) << via_root.status().ToString();
  EXPECT_EQ(*via_root, id + "\n");
  auto via_up = ReadString(rt(), id, "/home/sandbox/up");
  ASSERT_TRUE(via_up.ok()) << via_up.status().ToString();
  EXPECT_EQ(*via_up, id + "\n");

  auto st = rt().Stat(id, "/home/sandbox/rootlink");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->type, FileStat::Type::kSymlink);
  EXPECT_EQ(st->link_target, "/");
}

TEST_F(RuntimeFilesTest, DirectoryOperations) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(rt().MakeDirs(id, "/workspace/a/b/c", 0750).ok());
  ASSERT_TRUE(rt().MakeDirs(id, "/workspace/a/b/c", 0750).ok()) << "mkdir -p must be idempotent";
  CommandOutput o = Sh(id, "stat -c '%u %a %F' /workspace/a /workspace/a/b/c");
  EXPECT_EQ(o.out, "1000 750 directory\n1000 750 directory\n");

  ASSERT_TRUE(WriteString(rt(), id, "/workspace/a/f1", "12345").ok());
  ASSERT_TRUE(WriteString(rt(), id, "/workspace/a/f2", "").ok());
  ASSERT_EQ(Sh(id, "ln -s f1 /workspace/a/link").result.exit_code, 0);

  Status exists = rt().MakeDirs(id, "/workspace/a/f1", 0755);
  EXPECT_EQ(exists.code(), StatusCode::kAlreadyExists) << exists.ToString();

  auto list = rt().ListDir(id, "/workspace/a");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::map<std::string, FileStat> by_name;
  for (const auto& f : *list) by_name[f.name] = f;
  ASSERT_EQ(by_name.size(), 4u) << "expected b, f1, f2, link (and no . or ..)";
  EXPECT_EQ(by_name["b"].type, FileStat::Type::kDir);
  EXPECT_EQ(by_name["f1"].type, FileStat::Type::kFile);
  EXPECT_EQ(by_name["f1"].size, 5u);
  EXPECT_EQ(by_name["f1"].uid, 1000u);
  EXPECT_EQ(by_name["f2"].size, 0u);
  EXPECT_EQ(by_name["link"].type, FileStat::Type::kSymlink);
  EXPECT_EQ(rt().ListDir(id, "/workspace/nope").status().code(), StatusCode::kNotFound);

  auto st = rt().Stat(id, "/workspace/a/f1");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->type, FileStat::Type::kFile);
  EXPECT_EQ(st->size, 5u);
  EXPECT_EQ(st->mode, 0644u);
  EXPECT_EQ(st->uid, 1000u);
  EXPECT_EQ(st->gid, 1000u);
  EXPECT_GT(st->mtime_unix, 1600000000);
  // Files of root inside show uid 0; template files owned by host root show as unmapped.
  auto etc = rt().Stat(id, "/etc/passwd");
  ASSERT_TRUE(etc.ok());
  EXPECT_EQ(etc->uid, 0u);

  ASSERT_TRUE(rt().Rename(id, "/workspace/a/f1", "/workspace/a/b/moved").ok());
  o = Sh(id, "test -e /workspace/a/f1 && echo old-still-there; cat /workspace/a/b/moved");
  EXPECT_EQ(o.out, "12345");
  EXPECT_EQ(rt().Rename(id, "/workspace/a/missing", "/workspace/a/x").code(),
            StatusCode::kNotFound);

  ASSERT_TRUE(rt().Chmod(id, "/workspace/a/b/moved", 0600).ok());
  EXPECT_EQ(Sh(id, "stat -c %a /workspace/a/b/moved").out, "600\n");
  ASSERT_TRUE(rt().Chmod(id, "/workspace/a/b/moved", 0755).ok());
  EXPECT_EQ(Sh(id, "stat -c %a /workspace/a/b/moved").out, "755\n");

  ASSERT_TRUE(rt().Remove(id, "/workspace/a/f2", false).ok());
  EXPECT_EQ(Sh(id, "test -e /workspace/a/f2; echo $?").out, "1\n");
  // The link goes, never its target.
  ASSERT_TRUE(rt().Remove(id, "/workspace/a/link", false).ok());
  EXPECT_FALSE(rt().Remove(id, "/workspace/a", false).ok()) << "removed a non-empty dir";
  EXPECT_EQ(Sh(id, "test -d /workspace/a/b/c && echo still").out, "still\n");
  ASSERT_TRUE(rt().Remove(id, "/workspace/a", true).ok());
  EXPECT_EQ(Sh(id, "test -e /workspace/a; echo $?").out, "1\n");
  EXPECT_EQ(rt().Remove(id, "/", true).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Sh(id, "test -d /workspace && test -d /home/sandbox && echo ok").out, "ok\n");
}

TEST_F(RuntimeFilesTest, ReadOnlyAndRootOnlyPlacesAreRefused) {
  std::string id = NewSandbox();
  ASSERT_FALSE(id.empty());
  Status st = WriteString(rt(), id, "/usr/bin/paddock-evil", "#!/bin/sh\n", 0755);
  EXPECT_FALSE(st.ok()) << "wrote into the read-only /usr bind";
  EXPECT_EQ(Sh(id, "test -e /usr/bin/paddock-evil; echo $?").out, "1\n");
  EXPECT_FALSE(rt().MakeDirs(id, "/usr/paddock-evil-dir", 0755).ok());
  EXPECT_FALSE(rt().Chmod(id, "/usr/bin/env", 0777).ok());
  EXPECT_FALSE(rt().Remove(id, "/usr/bin/env", false).ok());
  EXPECT_EQ(Sh(id, "test -x /usr/bin/env && echo ok").out, "ok\n");

  // File operations act as the sandbox user: root-only places are off limits.
  st = WriteString(rt(), id, "/etc/passwd", "evil::0:0::/:/bin/sh\n");
  EXPECT_FALSE(st.ok()) << "the sandbox user's file API replaced /etc/passwd";
  EXPECT_EQ(Sh(id, "grep -c '^evil' /etc/passwd").out, "0\n");
  ASSERT_EQ(Sh(id, "echo secret > /etc/root-secret && chmod 600 /etc/root-secret", 30s, "root")
                .result.exit_code,
            0);
  auto secret = ReadString(rt(), id, "/etc/root-secret");
  ASSERT_FALSE(secret.ok());
  EXPECT_EQ(secret.status().code(), StatusCode::kPermissionDenied) << secret.status().ToString();
  EXPECT_FALSE(rt().Chmod(id, "/etc/root-secret", 0644).ok()) << "chmod of root's file";
  EXPECT_FALSE(rt().Remove(id, "/etc/root-secret", false).ok()) << "removed root's file";
  EXPECT_EQ(Sh(id, "cat /etc/root-secret", 30s, "root").out, "secret\n");
}

TEST_F(RuntimeFilesTest, WritingPastTheDiskCapFailsCleanly) {
  auto spec = DefaultSpec();
  spec.limits.disk_bytes = 16ull << 20;
  std::string id = NewSandbox(spec);
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(WriteString(rt(), id, "/home/sandbox/keep.txt", "original").ok());

  const std::string mib(1 << 20, 'z');
  int calls = 0;
  Status st =
      rt().WriteFile(id, "/home/sandbox/keep.txt", 0644, 1ull << 30, [&]() -> Result<std::string> {
        if (++calls > 32) return std::string();
        return mib;
      });
  ASSERT_FALSE(st.ok()) << "wrote 32 MiB into a 16 MiB writable layer";
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  // The target is untouched and no temporary file is left behind.
  auto kept = ReadString(rt(), id, "/home/sandbox/keep.txt");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "original");
  auto list = rt().ListDir(id, "/home/sandbox");
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (const auto& f : *list) names.push_back(f.name);
  EXPECT_EQ(names, std::vector<std::string>{"keep.txt"});
  auto usage = rt().Usage(id);
  ASSERT_TRUE(usage.ok());
  EXPECT_LT(usage->disk_used_bytes, 4ull << 20) << "the failed write's space was not freed";

  // max_bytes is enforced the same way.
  st = rt().WriteFile(id, "/home/sandbox/keep.txt", 0644, 10, OneChunk("0123456789abcdef"));
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_EQ(*ReadString(rt(), id, "/home/sandbox/keep.txt"), "original");

  // A source error aborts the write too.
  st = rt().WriteFile(id, "/home/sandbox/keep.txt", 0644, 1 << 20,
                      []() -> Result<std::string> { return Internal("client went away"); });
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(*ReadString(rt(), id, "/home/sandbox/keep.txt"), "original");
}

TEST_F(RuntimeFilesTest, UnknownSandboxIsNotFound) {
  EXPECT_EQ(ReadString(rt(), "no-such-sandbox", "/etc/hostname").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(WriteString(rt(), "no-such-sandbox", "/tmp/x", "x").code(), StatusCode::kNotFound);
  EXPECT_EQ(rt().ListDir("no-such-sandbox", "/").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace paddock::testing
