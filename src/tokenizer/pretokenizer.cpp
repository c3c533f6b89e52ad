// Pre-tokenizer regex sets and their PCRE2 execution.
//
// The patterns reproduce what llama.cpp's pre-tokenizers match, not just the
// upstream tokenizer.json text. llama.cpp runs them with std::regex on text in
// which every non-ASCII whitespace character has been replaced by \v, and with
// its own category tables; to be equivalent under PCRE2:
//  - `\s` / `\S` are expanded to the explicit White_Space set below (PCRE2's
//    UCP \s leaves out U+0085);
//  - literal character ranges never match a whitespace character (llama.cpp's
//    replacement makes those unreachable), so ranges that span one are split;
//  - llama.cpp's \p{S} leaves out ASCII '~', which the deepseek-v3 pattern
//    reproduces explicitly;
//  - `$` is written `\z` (end of segment only).
#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "core/error.h"

namespace rf {
namespace {

// White_Space characters, as the contents of a character class.
constexpr const char* kWs =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

// Expands \s and \S (outside and inside classes) to explicit sets.
std::string expand_whitespace(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's') {
        out += in_class ? std::string(kWs) : "[" + std::string(kWs) + "]";
      } else if (e == 'S') {
        RF_CHECK(!in_class, "pre-tokenizer pattern: \\S inside a class is not supported");
        out += "[^" + std::string(kWs) + "]";
      } else {
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // literal ] first
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

// --- the patterns -----------------------------------------------------------

constexpr const char* kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

#define RF_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
constexpr const char* kLlama3 =
    RF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                    "\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2 =
    RF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                    "\\s+(?!\\S)|\\s+";
constexpr const char* kSeedCoder =
    RF_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|"
                    "\\s+(?!\\S)|\\s+";
constexpr const char* kBailing =
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+";
// Tekken / GPT-4o as llama.cpp adapts them: "upper" = a letter that is not
// a-z, "lower" = a letter that is not A-Z (non-ASCII letters are both).
#define RF_UPPER "(?:(?=\\p{L})[^a-z])"
#define RF_LOWER "(?:(?=\\p{L})[^A-Z])"
constexpr const char* kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?" RF_UPPER "*" RF_LOWER "+|[^\\r\\n\\p{L}\\p{N}]?" RF_UPPER "+" RF_LOWER "*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?" RF_UPPER "*" RF_LOWER "+" RF_CONTRACTIONS "?|"
    "[^\\r\\n\\p{L}\\p{N}]?" RF_UPPER "+" RF_LOWER "*" RF_CONTRACTIONS "?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kDeepseek3Words =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|(?:~|[^\\r\\n\\p{L}\\p{P}\\p{S}])?[\\p{L}\\p{M}]+|"
    " ?(?:(?!~)[\\p{P}\\p{S}])+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
#undef RF_CONTRACTIONS
#undef RF_UPPER
#undef RF_LOWER

// DeepSeek LLM: cased letters (Unicode L&), written as code points.
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}"
    "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"
    "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
    "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}"
    "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}"
    "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
    "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+";
// ASCII and full-width punctuation, quotes, U+3001-3002 (U+3000 is whitespace).
constexpr const char* kDeepseekPunct =
    "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3001}-\\x{3002}]+";
// CJK, U+0800..U+4E00 and Hangul, minus the whitespace characters inside.
constexpr const char* kDeepseekCjk =
    "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{167F}\\x{1681}-\\x{1FFF}\\x{200B}-\\x{2027}\\x{202A}-\\x{202E}"
    "\\x{2030}-\\x{205E}\\x{2060}-\\x{2FFF}\\x{3001}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";
constexpr const char* kBloom = " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+";

std::vector<const char*> patterns_for(PreType t) {
  switch (t) {
    case PreType::Default:
      return {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
    case PreType::Llama3: return {kLlama3};
    case PreType::Qwen2: return {kQwen2};
    case PreType::SeedCoder: return {kSeedCoder};
    case PreType::Bailing: return {kBailing};
    case PreType::Tekken: return {kTekken};
    case PreType::Gpt4o: return {kGpt4o};
    case PreType::DeepseekLlm:
      return {"[\\r\\n]", kDeepseekLetters, kDeepseekPunct, "\\s+\\z", kDeepseekCjk, "\\p{N}+"};
    case PreType::DeepseekCoder: return {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kDeepseekCjk, "\\p{N}"};
    case PreType::Deepseek3:
      return {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+", kDeepseek3Words};
    case PreType::Falcon: return {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
    case PreType::Starcoder: return {"\\p{N}", kGpt2};
    case PreType::Gpt2: return {kGpt2};
    case PreType::Bloom: return {kBloom};
    case PreType::Viking: return {kBloom, "\\p{N}"};
  }
  return {};
}

}  // namespace

PreInfo pre_info(std::string_view n) {
  auto any = [&](std::initializer_list<std::string_view> names) {
    for (auto x : names)
      if (n == x) return true;
    return false;
  };
  PreInfo p;
  if (n.empty() || n == "default") p.type = PreType::Default;
  else if (any({"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"})) {
    p.type = PreType::Llama3, p.ignore_merges = true, p.add_bos = true;
  } else if (any({"dbrx", "smaug-bpe"})) p.type = PreType::Llama3;
  else if (any({"chatglm-bpe", "glm4"})) p.type = PreType::Llama3, p.no_bos = true;
  else if (any({"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan"})) p.type = PreType::Qwen2;
  else if (n == "deepseek-llm") p.type = PreType::DeepseekLlm;
  else if (n == "deepseek-coder") p.type = PreType::DeepseekCoder;
  else if (n == "deepseek-v3") p.type = PreType::Deepseek3;
  else if (n == "falcon") p.type = PreType::Falcon;
  else if (any({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}))
    p.type = PreType::Starcoder;
  else if (any({"gpt-2", "gpt2", "phi-2", "jina-es", "jina-de", "jina-v1-en", "jina-v2-es", "jina-v2-de",
                "jina-v2-code", "roberta-bpe", "gigachat", "mpt", "gpt-neox", "olmo", "jais", "trillion",
                "exaone4"}))
    p.type = PreType::Gpt2;
  else if (any({"poro-chat", "bloom", "gpt3-finnish"})) p.type = PreType::Bloom;
  else if (n == "viking") p.type = PreType::Viking;
  else if (n == "tekken") p.type = PreType::Tekken, p.ignore_merges = true, p.add_bos = true;
  else if (any({"gpt-4o", "llama4"})) p.type = PreType::Gpt4o;
  else if (any({"bailingmoe", "bailingmoe2", "llada-moe"})) p.type = PreType::Bailing;
  else if (n == "seed-coder") p.type = PreType::SeedCoder;
  else p.type = PreType::Default, p.known = false;
  return p;
}

const char* pre_type_name(PreType t) {
  switch (t) {
    case PreType::Default: return "default";
    case PreType::Llama3: return "llama3";
    case PreType::Qwen2: return "qwen2";
    case PreType::DeepseekLlm: return "deepseek-llm";
    case PreType::DeepseekCoder: return "deepseek-coder";
    case PreType::Deepseek3: return "deepseek-v3";
    case PreType::Falcon: return "falcon";
    case PreType::Starcoder: return "starcoder";
    case PreType::Gpt2: return "gpt-2";
    case PreType::Bloom: return "bloom";
    case PreType::Viking: return "viking";
    case PreType::Tekken: return "tekken";
    case PreType::Gpt4o: return "gpt-4o";
    case PreType::Bailing: return "bailingmoe";
    case PreType::SeedCoder: return "seed-coder";
  }
  return "?";
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(PreType type) : type_(type) {
  for (const char* pat : patterns_for(type)) {
    const std::string expanded = expand_whitespace(pat);
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(expanded.data()), expanded.size(),
                            PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail("pre-tokenizer '", pre_type_name(type), "': regex does not compile at offset ", err_off, ": ",
           reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // optional: falls back to the interpreter
    regexes_.push_back(std::move(c));
  }
}

PreTokenizer::~PreTokenizer() = default;

namespace {

// Per-call PCRE2 state (match data, a JIT stack grown only when needed).
class MatchState {
 public:
  MatchState() : md_(pcre2_match_data_create(4, nullptr)), mctx_(pcre2_match_context_create(nullptr)) {
    RF_CHECK(md_ && mctx_, "pre-tokenizer: out of memory");
  }
  ~MatchState() {
    pcre2_match_data_free(md_);
    pcre2_match_context_free(mctx_);
    if (stack_) pcre2_jit_stack_free(stack_);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;

  // Returns false on no match; sets [begin, end) relative to `subject`.
  bool match(const pcre2_code* code, std::string_view subject, size_t start, size_t& begin, size_t& end) {
    int rc = run(code, subject, start, 0);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      if (!stack_) {
        stack_ = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
        RF_CHECK(stack_, "pre-tokenizer: out of memory");
        pcre2_jit_stack_assign(mctx_, nullptr, stack_);
      }
      rc = run(code, subject, start, 0);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) rc = run(code, subject, start, PCRE2_NO_JIT);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      fail("pre-tokenizer: regex match failed: ", reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
    begin = ov[0], end = ov[1];
    return true;
  }

 private:
  int run(const pcre2_code* code, std::string_view s, size_t start, uint32_t extra) {
    return pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), start,
                       PCRE2_NO_UTF_CHECK | extra, md_, mctx_);
  }
  pcre2_match_data* md_;
  pcre2_match_context* mctx_;
  pcre2_jit_stack* stack_ = nullptr;
};

}  // namespace

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> segs, next;  // [begin, end) byte offsets into text
  if (!text.empty()) segs.emplace_back(0, text.size());
  MatchState ms;
  for (const auto& re : regexes_) {
    next.clear();
    next.reserve(segs.size() * 2);
    for (const auto& [sb, se] : segs) {
      const std::string_view subject = text.substr(sb, se - sb);
      size_t pos = 0, emitted = 0, mb = 0, me = 0;
      while (pos < subject.size() && ms.match(re->code, subject, pos, mb, me)) {
        if (me == mb) {  // empty match (none of our patterns can): no split here
          pos = mb + 1;
          while (pos < subject.size() && (uint8_t(subject[pos]) & 0xC0) == 0x80) ++pos;
          continue;
        }
        if (mb > emitted) next.emplace_back(sb + emitted, sb + mb);
        next.emplace_back(sb + mb, sb + me);
        emitted = pos = me;
      }
      if (emitted < subject.size()) next.emplace_back(sb + emitted, se);
    }
    segs.swap(next);
  }
  std::vector<std::string_view> words;
  words.reserve(segs.size());
  for (const auto& [b, e] : segs) words.push_back(text.substr(b, e - b));
  return words;
}

}  // namespace rf
