// A store in one file shared by processes: an append-only log of records,
// written and read under an exclusive flock, replayed into a local cache.
#pragma once

#include <mutex>
#include <unordered_map>

#include "core/store/store.hpp"

namespace distc {

class FileStore final : public Store {
public:
    FileStore(std::string path, int num_workers);
    ~FileStore() override;

    void set(const std::string &key, ByteView value) override;
    Bytes get(const std::string &key, Millis timeout) override;
    int64_t add(const std::string &key, int64_t delta) override;
    Bytes compare_set(const std::string &key, ByteView expected, ByteView desired) override;
    bool check(const std::vector<std::string> &keys) override;
    void wait(const std::vector<std::string> &keys, Millis timeout) override;
    bool delete_key(const std::string &key) override;
    int64_t num_keys() override;
    void append(const std::string &key, ByteView value) override;
    void multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values) override;

private:
    class Lock;
    void refresh();  // replay records appended since the last read; caller holds the lock
    void write_record(uint8_t op, const std::string &key, ByteView value);
    int64_t add_raw(const std::string &key, int64_t delta);
    std::vector<std::string> missing(const std::vector<std::string> &keys);

    std::string path_;
    int num_workers_;
    int fd_ = -1;
    std::mutex mu_;  // flock does not exclude threads sharing fd_
    uint64_t pos_ = 0;
    std::unordered_map<std::string, Bytes> cache_;
};

}  // namespace distc
