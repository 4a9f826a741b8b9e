// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "bootstrap/json.h"

#include <fmt/format.h>

#include <charconv>

namespace gradwire::bootstrap::json {

const Value* Value::find(std::string_view key) const {
  if (type != Type::Object) return nullptr;
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  std::optional<Value> document(std::string* error) {
    Value v;
    skip_space();
    if (!value(v, 0)) return fail(error);
    skip_space();
    if (at_ != t_.size()) {
      why_ = "unexpected text after the value";
      return fail(error);
    }
    return v;
  }

 private:
  std::optional<Value> fail(std::string* error) {
    if (error) *error = fmt::format("{} at offset {}", why_, at_);
    return std::nullopt;
  }

  bool bad(const char* why) {
    why_ = why;
    return false;
  }

  void skip_space() {
    while (at_ < t_.size() &&
           (t_[at_] == ' ' || t_[at_] == '\t' || t_[at_] == '\n' || t_[at_] == '\r')) {
      ++at_;
    }
  }

  bool literal(std::string_view word) {
    if (t_.substr(at_, word.size()) != word) return bad("unknown literal");
    at_ += word.size();
    return true;
  }

  bool value(Value& out, int depth) {
    if (depth > kMaxDepth) return bad("nested too deeply");
    if (at_ >= t_.size()) return bad("unexpected end");
    const char c = t_[at_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out.type = Value::Type::String;
      return string(out.text);
    }
    if (c == 't' || c == 'f') {
      out.type = Value::Type::Bool;
      out.boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') {
      out.type = Value::Type::Null;
      return literal("null");
    }
    if (c == '-' || (c >= '0' && c <= '9')) return number(out);
    return bad("unexpected character");
  }

  bool digits() {
    const size_t start = at_;
    while (at_ < t_.size() && t_[at_] >= '0' && t_[at_] <= '9') ++at_;
    return at_ > start;
  }

  bool number(Value& out) {
    const size_t start = at_;
    if (t_[at_] == '-') ++at_;
    if (at_ < t_.size() && t_[at_] == '0') {
      ++at_;
    } else if (!digits()) {
      return bad("malformed number");
    }
    if (at_ < t_.size() && t_[at_] == '.') {
      ++at_;
      if (!digits()) return bad("malformed number");
    }
    if (at_ < t_.size() && (t_[at_] == 'e' || t_[at_] == 'E')) {
      ++at_;
      if (at_ < t_.size() && (t_[at_] == '+' || t_[at_] == '-')) ++at_;
      if (!digits()) return bad("malformed number");
    }
    out.type = Value::Type::Number;
    out.text = std::string(t_.substr(start, at_ - start));
    return true;
  }

  bool hex4(uint32_t& out) {
    if (t_.size() - at_ < 4) return bad("truncated \\u escape");
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = t_[at_++];
      out <<= 4;
      if (h >= '0' && h <= '9') out |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f') out |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') out |= uint32_t(h - 'A' + 10);
      else return bad("malformed \\u escape");
    }
    return true;
  }

  static void utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  bool string(std::string& out) {
    ++at_;  // the opening quote
    for (;;) {
      if (at_ >= t_.size()) return bad("unterminated string");
      const char c = t_[at_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return bad("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= t_.size()) return bad("unterminated escape");
      const char e = t_[at_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t low = 0;
            if (t_.substr(at_, 2) != "\\u") return bad("unpaired surrogate");
            at_ += 2;
            if (!hex4(low)) return false;
            if (low < 0xDC00 || low > 0xDFFF) return bad("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return bad("unpaired surrogate");
          }
          utf8(cp, out);
          break;
        }
        default: return bad("unknown escape");
      }
    }
  }

  bool array(Value& out, int depth) {
    out.type = Value::Type::Array;
    ++at_;
    skip_space();
    if (at_ < t_.size() && t_[at_] == ']') {
      ++at_;
      return true;
    }
    for (;;) {
      skip_space();
      out.items.emplace_back();
      if (!value(out.items.back(), depth + 1)) return false;
      skip_space();
      if (at_ >= t_.size()) return bad("unterminated array");
      if (t_[at_] == ',') {
        ++at_;
        continue;
      }
      if (t_[at_] == ']') {
        ++at_;
        return true;
      }
      return bad("expected ',' or ']'");
    }
  }

  bool object(Value& out, int depth) {
    out.type = Value::Type::Object;
    ++at_;
    skip_space();
    if (at_ < t_.size() && t_[at_] == '}') {
      ++at_;
      return true;
    }
    for (;;) {
      skip_space();
      if (at_ >= t_.size() || t_[at_] != '"') return bad("expected a member name");
      std::string key;
      if (!string(key)) return false;
      skip_space();
      if (at_ >= t_.size() || t_[at_] != ':') return bad("expected ':'");
      ++at_;
      skip_space();
      out.members.push_back({std::move(key), Value{}});
      if (!value(out.members.back().value, depth + 1)) return false;
      skip_space();
      if (at_ >= t_.size()) return bad("unterminated object");
      if (t_[at_] == ',') {
        ++at_;
        continue;
      }
      if (t_[at_] == '}') {
        ++at_;
        return true;
      }
      return bad("expected ',' or '}'");
    }
  }

  std::string_view t_;
  size_t at_ = 0;
  const char* why_ = "malformed";
};

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::optional<Value> parse(std::string_view text, std::string* error) {
  if (text.size() > kMaxDocumentBytes) {
    if (error) *error = fmt::format("document of {} bytes (at most {})", text.size(), kMaxDocumentBytes);
    return std::nullopt;
  }
  return Parser(text).document(error);
}

std::optional<int64_t> as_int(const Value* v) {
  if (!v || (v->type != Value::Type::Number && v->type != Value::Type::String)) return std::nullopt;
  int64_t x = 0;
  const std::string& t = v->text;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return x;
}

bool as_bool(const Value* v) { return v && v->type == Value::Type::Bool && v->boolean; }

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) |
                       uint32_t(uint8_t(bytes[i + 2]));
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    uint32_t n = uint32_t(uint8_t(bytes[i])) << 16;
    if (rest == 2) n |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const int a = sextet(text[i]), b = sextet(text[i + 1]);
    const bool pad2 = last && text[i + 2] == '=' && text[i + 3] == '=';
    const bool pad1 = last && !pad2 && text[i + 3] == '=';
    const int c = pad2 ? 0 : sextet(text[i + 2]);
    const int d = (pad1 || pad2) ? 0 : sextet(text[i + 3]);
    if (a < 0 || b < 0 || c < 0 || d < 0) return std::nullopt;
    const uint32_t n = (uint32_t(a) << 18) | (uint32_t(b) << 12) | (uint32_t(c) << 6) | uint32_t(d);
    out += char((n >> 16) & 0xFF);
    if (!pad2) out += char((n >> 8) & 0xFF);
    if (!pad1 && !pad2) out += char(n & 0xFF);
  }
  return out;
}

}  // namespace gradwire::bootstrap::json
