#pragma once
// How a layer's zips are compressed (config packaging.codec). The codec is part of a zip's object key:
// the same shard zipped with each codec gives other bytes, so the two never share a key, a digest sidecar
// or a manifest, and a deflate store and a zstd store can live side by side under one prefix.
#include <optional>
#include <string_view>

namespace ferry::packaging {

enum class zip_codec {
  deflate,  // ZIP method 8 through libarchive: zips that unzip and Python's zipfile read
  zstd,     // ZIP method 93 in ferry's own container (zip_zstd_backend.hpp): faster on both sides
};

// What ends a shard's key: ".zip" for deflate (as stores made before zstd have it), ".zstd.zip" for zstd.
constexpr std::string_view zip_suffix(zip_codec codec) {
  return codec == zip_codec::zstd ? ".zstd.zip" : ".zip";
}

// The codec a zip key names, by its suffix; nullopt for a key that is no layer zip.
constexpr std::optional<zip_codec> codec_of_key(std::string_view key) {
  if (key.ends_with(zip_suffix(zip_codec::zstd))) return zip_codec::zstd;
  if (key.ends_with(zip_suffix(zip_codec::deflate))) return zip_codec::deflate;
  return std::nullopt;
}

// "zstd" or "deflate", as config spells them; nullopt for anything else.
constexpr std::optional<zip_codec> parse_zip_codec(std::string_view name) {
  if (name == "zstd") return zip_codec::zstd;
  if (name == "deflate") return zip_codec::deflate;
  return std::nullopt;
}

}  // namespace ferry::packaging
