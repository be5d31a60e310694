//! pagoda's transactional engine (built in the engine issue).
