public enum GamebaseModule {}
