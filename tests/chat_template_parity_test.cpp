// kiln's chat template renderer against the reference: the Llama 3, Qwen2.5, Qwen3 and
// Mistral templates in tests/chat_templates/ rendered over several conversations, by kiln and
// by Python's jinja2 set up as transformers' apply_chat_template sets it up
// (tests/chat_templates/reference_render.py), must give the same bytes, or the same error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "base/check.h"
#include "tests/run_command.h"
#include "trainer/data/chat_template.h"

namespace kiln::test {
namespace {

struct ParityCase {
  std::string family;  // the file tests/chat_templates/FAMILY.jinja
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = false;
  std::optional<bool> enable_thinking;
};

std::vector<ParityCase> parity_cases() {
  const std::vector<std::vector<ChatMessage>> conversations = {
      {{"user", "Hello!"}},
      {{"system", "You are terse."}, {"user", "What is 2+2?"}, {"assistant", "4"}},
      {{"system", "  Answer in French. \n"},
       {"user", "Bonjour, ça va ?\u00a0"},
       {"assistant", "Oui, très bien « merci »."},
       {"user", "Et \"toi\" ?\n\nDis-moi\t{{ not jinja }}"}},
      {{"user", "Think first."}, {"assistant", "<think>\nLet me see.\n</think>\n\nDone."}, {"user", "Again?"}},
      {{"user", "Q1"}, {"assistant", "<think>\nold\n</think>\n\nA1"}, {"user", "Q2"},
       {"assistant", "<think>\nnew reasoning\n</think>\n\nA2"}},
      {{"user", "twice"}, {"user", "in a row"}},  // Mistral refuses it
  };
  std::vector<ParityCase> cases;
  for (const char* family : {"llama3", "qwen2.5", "qwen3", "mistral"})
    for (const auto& conversation : conversations)
      for (const bool prompt : {false, true}) cases.push_back({family, conversation, prompt, std::nullopt});
  for (const bool thinking : {false, true}) cases.push_back({"qwen3", conversations[3], true, thinking});
  return cases;
}

std::tm parity_date() {
  std::tm date{};
  date.tm_year = 2024 - 1900;
  date.tm_mon = 6;
  date.tm_mday = 26;
  return date;
}

std::string template_path(const std::string& family) {
  return source_dir() + "/tests/chat_templates/" + family + ".jinja";
}

TEST(ChatTemplateParity, FourFamiliesRenderAsJinja2Does) {
  const std::vector<ParityCase> cases = parity_cases();
  nlohmann::json requests = nlohmann::json::array();
  for (const auto& c : cases) {
    nlohmann::json messages = nlohmann::json::array();
    for (const auto& m : c.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
    nlohmann::json variables = nlohmann::json::object();
    if (c.enable_thinking) variables["enable_thinking"] = *c.enable_thinking;
    requests.push_back({{"template", template_path(c.family)},
                        {"messages", messages},
                        {"add_generation_prompt", c.add_generation_prompt},
                        {"bos_token", "<s>"},
                        {"eos_token", "</s>"},
                        {"variables", variables},
                        {"date", {2024, 7, 26}}});
  }
  const std::string dir = fresh_dir("chat_template_parity");
  std::ofstream(dir + "/cases.json") << requests.dump();
  const CommandResult reference = run_command("/usr/bin/python3 " + source_dir() +
                                              "/tests/chat_templates/reference_render.py " + dir + "/cases.json " +
                                              dir + "/out.json");
  ASSERT_EQ(reference.exit_code, 0) << "the reference needs python3-jinja2 (scripts/setup.sh):\n" << reference.output;
  const nlohmann::json expected = nlohmann::json::parse(read_text(dir + "/out.json"));
  ASSERT_EQ(expected.size(), cases.size());

  std::size_t errors = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const ParityCase& c = cases[i];
    ChatTemplateOptions options;
    options.add_generation_prompt = c.add_generation_prompt;
    options.bos_token = "<s>";
    options.eos_token = "</s>";
    options.now = parity_date();
    if (c.enable_thinking) options.variables["enable_thinking"] = *c.enable_thinking;
    const ChatTemplate compiled(text_of(template_path(c.family)));
    std::string rendered, error;
    try {
      rendered = compiled.render(c.messages, options);
    } catch (const Error& e) {
      error = e.what();
    }
    const std::string what = c.family + " case " + std::to_string(i);
    if (expected[i].contains("error")) {
      ++errors;
      EXPECT_EQ(error, expected[i]["error"].get<std::string>()) << what;
    } else {
      EXPECT_EQ(error, "") << what;
      EXPECT_EQ(rendered, expected[i]["text"].get<std::string>()) << what;
    }
  }
  EXPECT_EQ(errors, 2u) << "Mistral's two refusals of a conversation that does not alternate";
}

}  // namespace
}  // namespace kiln::test
