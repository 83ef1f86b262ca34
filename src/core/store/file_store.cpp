#include "core/store/file_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/util/error.hpp"

namespace distc {

namespace {

constexpr char kMagic[8] = {'D', 'I', 'S', 'T', 'C', 'F', 'S', '1'};
constexpr uint8_t kOpSet = 1, kOpDelete = 2;
// User keys live under "/", so the internal counters below never collide (as c10d).
const std::string kUserPrefix = "/";
const std::string kCleanupKey = "cleanup/";

void write_all(int fd, const void *p, size_t n, const std::string &path) {
    auto *c = static_cast<const char *>(p);
    while (n) {
        ssize_t w = ::write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            fail_errno(DISTC_EIO, "cannot write file store '" + path + "'", errno);
        }
        c += w;
        n -= static_cast<size_t>(w);
    }
}

void pread_all(int fd, void *p, size_t n, uint64_t off, const std::string &path) {
    auto *c = static_cast<char *>(p);
    while (n) {
        ssize_t r = ::pread(fd, c, n, static_cast<off_t>(off));
        if (r < 0) {
            if (errno == EINTR) continue;
            fail_errno(DISTC_EIO, "cannot read file store '" + path + "'", errno);
        }
        if (r == 0) fail(DISTC_EPROTO, "file store '" + path + "' ends inside a record");
        c += r;
        off += static_cast<uint64_t>(r);
        n -= static_cast<size_t>(r);
    }
}

}  // namespace

// Holds the in-process mutex and the cross-process flock, and brings the cache up to date.
class FileStore::Lock {
public:
    explicit Lock(FileStore &s) : s_(s), lk_(s.mu_) {
        while (::flock(s_.fd_, LOCK_EX) != 0) {
            if (errno != EINTR) fail_errno(DISTC_EIO, "cannot lock file store '" + s_.path_ + "'", errno);
        }
        try {
            s_.refresh();
        } catch (...) {
            ::flock(s_.fd_, LOCK_UN);
            throw;
        }
    }
    ~Lock() { ::flock(s_.fd_, LOCK_UN); }

private:
    FileStore &s_;
    std::lock_guard<std::mutex> lk_;
};

FileStore::FileStore(std::string path, int num_workers) : path_(std::move(path)), num_workers_(num_workers) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fail_errno(DISTC_EIO, "cannot open file store '" + path_ + "'", errno);
    try {
        Lock l(*this);  // writes the header of a new file, rejects a foreign one
    } catch (...) {
        ::close(fd_);
        throw;
    }
}

FileStore::~FileStore() {
    // Best effort, as c10d: the last of num_workers users removes the file.
    try {
        int64_t finished = add_raw(kCleanupKey, 1);
        if (num_workers_ > 0 && finished >= num_workers_) ::unlink(path_.c_str());
    } catch (...) {}
    ::close(fd_);
}

void FileStore::refresh() {
    struct stat st;
    if (::fstat(fd_, &st) != 0) fail_errno(DISTC_EIO, "cannot stat file store '" + path_ + "'", errno);
    uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size == 0) {
        // A new file: we hold the lock, so we are the one to write the header.
        write_all(fd_, kMagic, sizeof kMagic, path_);
        pos_ = sizeof kMagic;
        return;
    }
    if (pos_ == 0) {
        char magic[sizeof kMagic];
        if (size < sizeof kMagic) fail(DISTC_EPROTO, "file '" + path_ + "' is not a distc file store");
        pread_all(fd_, magic, sizeof magic, 0, path_);
        if (std::memcmp(magic, kMagic, sizeof kMagic) != 0)
            fail(DISTC_EPROTO, "file '" + path_ + "' is not a distc file store");
        pos_ = sizeof kMagic;
    }
    if (size < pos_) fail(DISTC_EPROTO, "file store '" + path_ + "' shrank under us (removed and recreated?)");
    while (pos_ < size) {
        uint8_t op;
        uint64_t klen, vlen;
        pread_all(fd_, &op, 1, pos_, path_);
        pread_all(fd_, &klen, 8, pos_ + 1, path_);
        if (klen > DISTC_STORE_MAX_VALUE_SIZE || (op != kOpSet && op != kOpDelete))
            fail(DISTC_EPROTO, "file store '" + path_ + "' holds a malformed record at offset " + std::to_string(pos_));
        std::string key(klen, '\0');
        pread_all(fd_, key.data(), klen, pos_ + 9, path_);
        pread_all(fd_, &vlen, 8, pos_ + 9 + klen, path_);
        if (vlen > DISTC_STORE_MAX_VALUE_SIZE)
            fail(DISTC_EPROTO, "file store '" + path_ + "' holds a malformed record at offset " + std::to_string(pos_));
        Bytes val(vlen);
        if (vlen) pread_all(fd_, val.data(), vlen, pos_ + 17 + klen, path_);
        if (op == kOpSet)
            cache_[key] = std::move(val);
        else
            cache_.erase(key);
        pos_ += 17 + klen + vlen;
    }
}

void FileStore::write_record(uint8_t op, const std::string &key, ByteView value) {
    // One write per record: readers only look under the lock, but a crash should
    // leave either a whole record or none.
    std::vector<uint8_t> rec(17 + key.size() + value.size);
    uint64_t klen = key.size(), vlen = value.size;
    rec[0] = op;
    std::memcpy(&rec[1], &klen, 8);
    std::memcpy(&rec[9], key.data(), key.size());
    std::memcpy(&rec[9 + key.size()], &vlen, 8);
    if (value.size) std::memcpy(&rec[17 + key.size()], value.data, value.size);
    if (::lseek(fd_, 0, SEEK_END) < 0) fail_errno(DISTC_EIO, "cannot seek file store '" + path_ + "'", errno);
    write_all(fd_, rec.data(), rec.size(), path_);
    pos_ += rec.size();
    if (op == kOpSet)
        cache_[key] = value.to_bytes();
    else
        cache_.erase(key);
}

void FileStore::set(const std::string &key, ByteView value) {
    Lock l(*this);
    write_record(kOpSet, kUserPrefix + key, value);
}

int64_t FileStore::add_raw(const std::string &key, int64_t delta) {
    Lock l(*this);
    auto it = cache_.find(key);
    int64_t v = add_to_counter(key, it == cache_.end() ? nullptr : &it->second, delta);
    write_record(kOpSet, key, counter_bytes(v));
    return v;
}

int64_t FileStore::add(const std::string &key, int64_t delta) { return add_raw(kUserPrefix + key, delta); }

Bytes FileStore::compare_set(const std::string &key, ByteView expected, ByteView desired) {
    Lock l(*this);
    std::string k = kUserPrefix + key;
    auto it = cache_.find(k);
    bool created;
    Bytes cur = it == cache_.end() ? Bytes{} : it->second;
    Bytes r = compare_set_value(it == cache_.end() ? nullptr : &cur, &created, expected, desired);
    if (created || (it != cache_.end() && cur != it->second)) write_record(kOpSet, k, r);
    return r;
}

std::vector<std::string> FileStore::missing(const std::vector<std::string> &keys) {
    Lock l(*this);
    std::vector<std::string> m;
    for (const auto &k : keys)
        if (!cache_.count(kUserPrefix + k)) m.push_back(k);
    return m;
}

bool FileStore::check(const std::vector<std::string> &keys) { return missing(keys).empty(); }

void FileStore::wait(const std::vector<std::string> &keys, Millis timeout) {
    // Other processes only show up in the file: poll, backing off to 10 ms.
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto nap = std::chrono::microseconds(100);
    for (;;) {
        auto m = missing(keys);
        if (m.empty()) return;
        if (std::chrono::steady_clock::now() >= deadline) fail_wait_timeout(m, timeout);
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, std::chrono::microseconds(10000));
    }
}

Bytes FileStore::get(const std::string &key, Millis timeout) {
    wait({key}, timeout);
    Lock l(*this);
    auto it = cache_.find(kUserPrefix + key);
    if (it == cache_.end()) fail(DISTC_ENOTFOUND, "key '" + key + "' was deleted while being read");
    return it->second;
}

bool FileStore::delete_key(const std::string &key) {
    Lock l(*this);
    std::string k = kUserPrefix + key;
    if (!cache_.count(k)) return false;
    write_record(kOpDelete, k, ByteView());
    return true;
}

int64_t FileStore::num_keys() {
    Lock l(*this);
    int64_t n = 0;
    for (const auto &kv : cache_)
        if (kv.first.compare(0, kUserPrefix.size(), kUserPrefix) == 0) ++n;
    return n;
}

void FileStore::append(const std::string &key, ByteView value) {
    Lock l(*this);
    std::string k = kUserPrefix + key;
    Bytes v = cache_.count(k) ? cache_[k] : Bytes{};
    check_append(key, v.size(), value.size);
    v.insert(v.end(), value.data, value.data + value.size);
    write_record(kOpSet, k, v);
}

void FileStore::multi_set(const std::vector<std::string> &keys, const std::vector<ByteView> &values) {
    Lock l(*this);
    for (size_t i = 0; i < keys.size(); ++i) write_record(kOpSet, kUserPrefix + keys[i], values[i]);
}

}  // namespace distc
