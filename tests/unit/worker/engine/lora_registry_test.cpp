// The adapter registry: paths confined to the adapter directory (no `..`, no absolute escape, no
// symlink escape), load/unload/conflict errors, and adapters kept alive by their users.
#include "engine/adapter_registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "worker/lora_builder.h"

namespace vigil {
namespace {

namespace fs = std::filesystem;

class LoraRegistryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = LlamaModel::load(VIGIL_MODEL_PATH).release(); }
  static void TearDownTestSuite() { delete model_; }

  void SetUp() override {
    root_ = fs::path(testing::TempDir()) / ("lora_registry_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "adapters" / "sub");
    fs::create_directories(root_ / "outside");
    test::LoraSpec spec;
    spec.pairs = {{0, "attn_q", 8}, {5, "ffn_down", 8}};
    const auto bytes = test::build_lora(spec, *model_);
    test::write_file(dir() + "/good.gguf", bytes);
    test::write_file(dir() + "/sub/nested.gguf", bytes);
    test::write_file((root_ / "outside" / "secret.gguf").string(), bytes);
    spec.arch = "gpt2";
    test::write_file(dir() + "/wrong_arch.gguf", test::build_lora(spec, *model_));
    fs::create_symlink(root_ / "outside" / "secret.gguf", root_ / "adapters" / "escape.gguf");
    fs::create_directory_symlink(root_ / "outside", root_ / "adapters" / "escape_dir");
    fs::create_symlink(root_ / "adapters" / "good.gguf", root_ / "adapters" / "alias.gguf");
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string dir() const { return (root_ / "adapters").string(); }
  std::string confine(const std::string& path, std::string& error) const {
    error.clear();
    return confine_adapter_path(dir(), path, error);
  }

  static LlamaModel* model_;
  fs::path root_;
};
LlamaModel* LoraRegistryTest::model_ = nullptr;

TEST_F(LoraRegistryTest, PathsInsideTheDirectoryResolve) {
  std::string err;
  const std::string real_dir = fs::canonical(dir()).string();
  EXPECT_EQ(confine("good.gguf", err), real_dir + "/good.gguf") << err;
  EXPECT_EQ(confine("sub/nested.gguf", err), real_dir + "/sub/nested.gguf") << err;
  EXPECT_EQ(confine("./sub//nested.gguf", err), real_dir + "/sub/nested.gguf") << err;
  EXPECT_EQ(confine(dir() + "/good.gguf", err), real_dir + "/good.gguf") << err;
  EXPECT_EQ(confine("alias.gguf", err), real_dir + "/good.gguf") << "a symlink that stays inside is fine: " << err;
}

TEST_F(LoraRegistryTest, EscapesAreRefused) {
  std::string err;
  EXPECT_EQ(confine("../outside/secret.gguf", err), "");
  EXPECT_EQ(err, "lora_path: '..' components are not allowed");
  EXPECT_EQ(confine("sub/../good.gguf", err), "");
  EXPECT_EQ(err, "lora_path: '..' components are not allowed");
  EXPECT_EQ(confine("..", err), "");
  EXPECT_EQ(confine((root_ / "outside" / "secret.gguf").string(), err), "");
  EXPECT_NE(err.find("is outside the adapter directory"), std::string::npos) << err;
  EXPECT_EQ(confine("/etc/passwd", err), "");
  EXPECT_NE(err.find("is outside the adapter directory"), std::string::npos) << err;
  EXPECT_EQ(confine(dir() + "_sibling/x.gguf", err), "") << "a prefix of the name is not a parent";
  EXPECT_NE(err.find("is outside the adapter directory"), std::string::npos) << err;
  EXPECT_EQ(confine("escape.gguf", err), "");
  EXPECT_NE(err.find("is outside the adapter directory"), std::string::npos) << "symlink escape: " << err;
  EXPECT_EQ(confine("escape_dir/secret.gguf", err), "");
  EXPECT_NE(err.find("is outside the adapter directory"), std::string::npos) << "directory symlink escape: " << err;
}

TEST_F(LoraRegistryTest, MissingAndNonRegularPathsAreNamed) {
  std::string err;
  EXPECT_EQ(confine("", err), "");
  EXPECT_EQ(err, "lora_path: must not be empty");
  EXPECT_EQ(confine("nope.gguf", err), "");
  EXPECT_EQ(err, "lora_path: 'nope.gguf': No such file or directory");
  EXPECT_EQ(confine("sub", err), "");
  EXPECT_EQ(err, "lora_path: 'sub' is not a regular file");
  EXPECT_EQ(confine_adapter_path((root_ / "missing").string(), "good.gguf", err), "");
  EXPECT_NE(err.find("the adapter directory"), std::string::npos) << err;
}

TEST_F(LoraRegistryTest, LoadFindUnload) {
  AdapterRegistry reg(*model_, dir());
  EXPECT_EQ(reg.load("sql", "good.gguf").status, AdapterStatus::kOk);
  EXPECT_EQ(reg.load("chat", "sub/nested.gguf").status, AdapterStatus::kOk);
  EXPECT_EQ(reg.names(), (std::vector<std::string>{"chat", "sql"}));
  EXPECT_EQ(reg.size(), 2u);
  EXPECT_GT(reg.bytes(), 0u);
  ASSERT_NE(reg.find("sql"), nullptr);
  EXPECT_EQ(reg.find("sql")->n_pairs(), 2);
  EXPECT_EQ(reg.find("other"), nullptr);

  AdapterResult r = reg.load("sql", "good.gguf");
  EXPECT_EQ(r.status, AdapterStatus::kConflict);
  EXPECT_EQ(r.message, "adapter 'sql' is already loaded");
  r = reg.unload("nope");
  EXPECT_EQ(r.status, AdapterStatus::kNotFound);
  EXPECT_EQ(r.message, "adapter 'nope' is not loaded");
  EXPECT_EQ(reg.unload("sql").status, AdapterStatus::kOk);
  EXPECT_EQ(reg.find("sql"), nullptr);
  EXPECT_EQ(reg.load("sql", "good.gguf").status, AdapterStatus::kOk) << "a name can be reused after unload";
}

TEST_F(LoraRegistryTest, BadRequestsLeaveTheRegistryAsItWas) {
  AdapterRegistry reg(*model_, dir());
  ASSERT_EQ(reg.load("keep", "good.gguf").status, AdapterStatus::kOk);
  AdapterResult r = reg.load("x", "wrong_arch.gguf");
  EXPECT_EQ(r.status, AdapterStatus::kInvalidFile);
  EXPECT_NE(r.message.find("invalid adapter file:"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("architecture 'gpt2'"), std::string::npos) << r.message;
  r = reg.load("x", "escape.gguf");
  EXPECT_EQ(r.status, AdapterStatus::kBadRequest);
  EXPECT_NE(r.message.find("outside the adapter directory"), std::string::npos) << r.message;
  r = reg.load("bad name", "good.gguf");
  EXPECT_EQ(r.status, AdapterStatus::kBadRequest);
  EXPECT_EQ(r.message, "lora_name: only letters, digits and . _ - : / are allowed");
  EXPECT_EQ(reg.load("", "good.gguf").status, AdapterStatus::kBadRequest);
  EXPECT_EQ(reg.names(), (std::vector<std::string>{"keep"}));
}

TEST_F(LoraRegistryTest, WithoutADirectoryLoadingIsDisabled) {
  AdapterRegistry reg(*model_, "");
  const AdapterResult r = reg.load("sql", dir() + "/good.gguf");
  EXPECT_EQ(r.status, AdapterStatus::kDisabled);
  EXPECT_NE(r.message.find("--adapter-dir"), std::string::npos) << r.message;
}

TEST_F(LoraRegistryTest, UsersKeepAnUnloadedAdapterAlive) {
  AdapterRegistry reg(*model_, dir());
  ASSERT_EQ(reg.load("sql", "good.gguf").status, AdapterStatus::kOk);
  std::shared_ptr<const LoraAdapter> held = reg.find("sql");
  std::weak_ptr<const LoraAdapter> watch = held;
  ASSERT_EQ(reg.unload("sql").status, AdapterStatus::kOk);
  ASSERT_FALSE(watch.expired());
  EXPECT_EQ(held->n_pairs(), 2);
  held.reset();
  EXPECT_TRUE(watch.expired()) << "freed once its last user is done";
}

TEST_F(LoraRegistryTest, ConcurrentLoadsOfOneNameLoadItOnce) {
  AdapterRegistry reg(*model_, dir());
  std::atomic<int> ok{0}, conflict{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      const AdapterResult r = reg.load("same", "good.gguf");
      (r.status == AdapterStatus::kOk ? ok : conflict).fetch_add(1);
      reg.find("same");
      reg.names();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(conflict.load(), 3);
  EXPECT_EQ(reg.size(), 1u);
}

}  // namespace
}  // namespace vigil
